"""The control channel's framing, and the rank side of the rendezvous outside coc-run."""

import asyncio
import socket
import struct

import pytest

from coc.errors import ControlError, EngineError, LaunchError
from coc import protocol
from coc.rendezvous import _state, credentials, rendezvous


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


@pytest.mark.parametrize("data, words", [
    (struct.pack(">I", protocol.MAX_MESSAGE + 1), "announces"),
    (b"\x00\x00", "inside a message header"),
    (struct.pack(">I", 10) + b"{}", "inside a message body"),
    (struct.pack(">I", 2) + b"[]", "without a type"),
    (struct.pack(">I", 3) + b"{x}", "not JSON"),
])
def test_garbled_channels_raise_control_errors(data, words):
    with pytest.raises(ControlError, match=words) as info:
        _read_all(data)
    assert not isinstance(info.value, EngineError)     # the engine's wire has its own


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
