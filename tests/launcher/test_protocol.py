"""The control channels' framing and its two readers, and the rank side of the rendezvous
outside coc-run."""

import asyncio
import os
import socket
import struct
import threading

import pytest

from coc.errors import ControlError, EngineError, LaunchError
from coc import protocol
from coc.rendezvous import _state, credentials, rendezvous

TIMEOUT = 30.0


@pytest.fixture(autouse=True)
def _fresh_rank_side():
    """Each test is a new rank: forget the socket and welcome of the one before."""
    _state.update(socket=None, reader=None, welcome=None)
    yield
    _state.update(socket=None, reader=None, welcome=None)


def _read_all(data):
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        messages = []
        while (message := await protocol.read_message(reader)) is not None:
            messages.append(message)
        return messages
    return asyncio.run(go())


def test_messages_round_trip_back_to_back():
    sent = [{"type": "output", "rank": 1, "data": protocol.pack_bytes(b"\x00\xffhi")},
            {"type": "exit", "rank": 1, "code": 0, "signal": None}]
    received = _read_all(b"".join(map(protocol.encode, sent)))
    assert received == sent
    assert protocol.unpack_bytes(received[0]["data"]) == b"\x00\xffhi"


def _read_all_sync(data, peer="the peer"):
    """Read every message of ``data`` through a pipe with the synchronous reader."""
    rfd, wfd = os.pipe()
    try:
        writer = threading.Thread(target=_write_and_close, args=(wfd, data))
        writer.start()
        reader = protocol.MessageReader(rfd, peer)
        messages = []
        try:
            while (message := reader.read(TIMEOUT)) is not None:
                messages.append(message)
        finally:
            writer.join(TIMEOUT)
        return messages
    finally:
        os.close(rfd)


def _write_and_close(fd, data):
    for k in range(0, len(data), 7):          # in small pieces: messages arrive split
        os.write(fd, data[k:k + 7])
    os.close(fd)


READERS = {"async": _read_all, "sync": _read_all_sync}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_messages_round_trip_back_to_back_with_either_reader(read):
    sent = [{"type": "status", "id": 1}, {"type": "exited", "rank": 3},
            {"type": "output", "data": protocol.pack_bytes(bytes(300))}]
    assert read(b"".join(map(protocol.encode, sent))) == sent


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
@pytest.mark.parametrize("data, words", [
    (struct.pack(">I", protocol.MAX_MESSAGE + 1), "announces"),
    (b"\x00\x00", "inside a message header"),
    (struct.pack(">I", 10) + b"{}", "inside a message body"),
    (struct.pack(">I", 2) + b"[]", "without a type"),
    (struct.pack(">I", 3) + b"{x}", "not JSON"),
])
def test_garbled_channels_raise_control_errors(read, data, words):
    with pytest.raises(ControlError, match=words) as info:
        read(data)
    assert not isinstance(info.value, EngineError)     # the engine's wire has its own


def test_errors_name_the_peer_for_either_reader():
    data = struct.pack(">I", 3) + b"{x}"
    with pytest.raises(ControlError, match="^gateway daemon 4: control message is not JSON"):
        _read_all_sync(data, "gateway daemon 4")

    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        await protocol.read_message(reader, "site b's agent")
    with pytest.raises(ControlError, match="^site b's agent: control message is not JSON"):
        asyncio.run(go())


def test_an_oversized_length_fails_before_the_body_is_sent():
    """Only the header is ever written: the reader must not wait for a body."""
    rfd, wfd = os.pipe()
    try:
        os.write(wfd, struct.pack(">I", protocol.MAX_MESSAGE + 1))
        with pytest.raises(ControlError, match="announces 67108865 bytes, more than"):
            protocol.MessageReader(rfd, "the peer").read(TIMEOUT)
    finally:
        os.close(rfd)
        os.close(wfd)


def test_the_sync_reader_waits_no_longer_than_its_timeout():
    rfd, wfd = os.pipe()
    try:
        os.write(wfd, protocol.encode({"type": "hello"})[:6])     # half a message, then quiet
        reader = protocol.MessageReader(rfd, "coc.gateway (pid 7)")
        with pytest.raises(ControlError, match=r"^coc.gateway \(pid 7\) sent no message "
                                               r"within 0.2 s"):
            reader.read(0.2)
        os.write(wfd, protocol.encode({"type": "hello"})[6:])     # the rest: nothing lost
        assert reader.read(TIMEOUT) == {"type": "hello"}
    finally:
        os.close(rfd)
        os.close(wfd)


def test_the_sync_reader_reads_a_non_blocking_socket_and_keeps_what_follows():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.setblocking(False)
        ours.sendall(protocol.encode({"type": "a"}) + protocol.encode({"type": "b"}))
        reader = protocol.MessageReader(theirs.fileno(), "the agent")
        assert reader.read(TIMEOUT) == {"type": "a"}
        assert reader.next() == {"type": "b"}           # already read with the first
        assert reader.next() is None
        ours.close()
        assert reader.read(TIMEOUT) is None


def test_the_sync_reader_starts_with_bytes_taken_before():
    """A header received with file descriptors (``socket.recv_fds``) starts the message."""
    data = protocol.encode({"type": "start", "argv": ["x"]})
    rfd, wfd = os.pipe()
    try:
        os.write(wfd, data[4:])
        assert protocol.MessageReader(rfd, "the agent", data[:4]).read(TIMEOUT) == \
            {"type": "start", "argv": ["x"]}
    finally:
        os.close(rfd)
        os.close(wfd)


def test_write_message_writes_a_message_larger_than_the_pipe():
    message = {"type": "output", "data": "x" * (1 << 20)}
    rfd, wfd = os.pipe()
    writer = threading.Thread(target=protocol.write_message, args=(wfd, message))
    try:
        writer.start()
        assert protocol.MessageReader(rfd, "the writer").read(TIMEOUT) == message
    finally:
        writer.join(TIMEOUT)
        os.close(rfd)
        os.close(wfd)


def test_rendezvous_outside_coc_run_says_how_to_start_the_program():
    with pytest.raises(LaunchError, match="COC_CONTROL_FD is not set: start this program "
                                          "with coc-run"):
        rendezvous("tcp://127.0.0.1:1", environ={})


def _agent_end(*messages):
    """Return (agent's socket, the fd a rank would inherit) with ``messages`` already sent."""
    ours, theirs = socket.socketpair()
    for message in messages:
        ours.sendall(protocol.encode(message))
    return ours, {"COC_CONTROL_FD": str(theirs.detach())}


WELCOME = {"type": "welcome", "rank": 1, "size": 2, "self_id": 1, "job_id": "j",
           "keys": {"0": {"key": "ab" * 32, "gateway": False}}}


def test_rendezvous_reports_a_torn_down_job():
    ours, environ = _agent_end(WELCOME)
    ours.close()
    with pytest.raises(LaunchError, match="torn down before the rendezvous completed"):
        rendezvous("tcp://x", environ=environ)


def test_credentials_come_first_then_the_rendezvous_answer_with_integer_ids():
    ours, environ = _agent_end(WELCOME, {"type": "rendezvous", "peers": {"0": "tcp://a"},
                                         "routes": {"0": [[2, 1000]]},
                                         "placement": [["a", "a1"], ["b", "b1"]]})
    assert credentials(environ) == {"rank": 1, "size": 2, "self_id": 1, "job_id": "j",
                                    "keys": {0: (bytes.fromhex("ab" * 32), False)}}
    info = rendezvous("tcp://b", environ=environ)
    header = ours.recv(4)
    assert protocol.decode(ours.recv(protocol.decode_length(header))) == \
        {"type": "address", "address": "tcp://b"}
    ours.close()
    assert info["keys"] == {0: (bytes.fromhex("ab" * 32), False)} and info["self_id"] == 1
    assert info["peers"] == {0: "tcp://a"}
    assert info["routes"] == {0: {"small": [(2, 1000)], "large": [(2, 1000)]}}
    assert info["placement"] == [("a", "a1"), ("b", "b1")]
