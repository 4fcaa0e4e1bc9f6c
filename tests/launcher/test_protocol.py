"""The control channel's framing, and the rank side of the rendezvous outside coc-run."""

import asyncio
import socket
import struct

import pytest

from coc.errors import LaunchError, ProtocolError
from coc.launcher import protocol
from coc.launcher.rankside import rendezvous


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


@pytest.mark.parametrize("data, words", [
    (struct.pack(">I", protocol.MAX_MESSAGE + 1), "announces"),
    (b"\x00\x00", "inside a message header"),
    (struct.pack(">I", 10) + b"{}", "inside a message body"),
    (struct.pack(">I", 2) + b"[]", "without a type"),
    (struct.pack(">I", 3) + b"{x}", "not JSON"),
])
def test_garbled_channels_raise_protocol_errors(data, words):
    with pytest.raises(ProtocolError, match=words):
        _read_all(data)


def test_rendezvous_outside_coc_run_says_how_to_start_the_program():
    with pytest.raises(LaunchError, match="COC_CONTROL_FD is not set: start this program "
                                          "with coc-run"):
        rendezvous("tcp://127.0.0.1:1", environ={})


def test_rendezvous_reports_a_torn_down_job():
    ours, theirs = socket.socketpair()
    ours.close()
    with pytest.raises(LaunchError, match="torn down before the rendezvous completed"):
            rendezvous("tcp://x", environ={"COC_CONTROL_FD": str(theirs.detach())})


def test_rendezvous_answer_is_decoded_with_integer_endpoint_ids():
    ours, theirs = socket.socketpair()
    answer = {"type": "rendezvous", "rank": 1, "size": 2, "self_id": 1, "job_id": "j",
              "secret": "ab" * 16, "peers": {"0": "tcp://a", "1": "tcp://b"},
              "routes": {"0": [[2, 1000]]}}
    ours.sendall(protocol.encode(answer))
    info = rendezvous("tcp://b", environ={"COC_CONTROL_FD": str(theirs.detach())})
    header = ours.recv(4)
    assert protocol.decode(ours.recv(protocol.decode_length(header))) == \
        {"type": "address", "address": "tcp://b"}
    ours.close()
    assert info["secret"] == bytes.fromhex("ab" * 16)
    assert info["peers"] == {0: "tcp://a", 1: "tcp://b"}
    assert info["routes"] == {0: [(2, 1000)]}
