"""A blocked waiter whose engine has one connection sleeps in that socket's recv
(docs/engine.md, "Waiting"): one system call per frame, as a C endpoint's blocking recv,
where the poller costs an ``epoll_wait`` before each read. ``Engine.stats()`` counts
those reads (``reads_blocked``).

No timing is asserted: the counts say which way the waits went, whatever the load.
"""

import os
import platform
import signal
import time

import numpy as np
import pytest

import engine_peers
from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
BLOCK = {"shm": False, "spin_ns": -1}   # waits block at once, over a socket
LIVENESS_MS = 600
#: recvfrom's system call number, where a waiter sleeps in its connection's recv
RECVFROM = {"x86_64": 45, "aarch64": 207}.get(platform.machine())


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch):
    """These tests set their own spin cap and liveness timeout."""
    monkeypatch.delenv("COC_SPIN_NS", raising=False)
    monkeypatch.delenv("COC_LIVENESS_MS", raising=False)


def _echo_child(open_engine, spawn, child_id, count, scenario="echo", me=None):
    """Endpoint 1 (``me``, opened here unless given) and an echo child ``child_id``
    connected to it; return both."""
    me = me or open_engine(1, **BLOCK)
    child = spawn(child_id, scenario, peer=1, count=count, engine_kwargs=BLOCK)
    me.add_peer(child_id, child.address)
    me.set_route(child_id, [child_id])
    child.connect({1: me.address}, {1: [1]})
    return me, child


def _ping_pong(me, peer, count):
    """``count`` 8 B round trips with ``peer``, each message checked."""
    for seq in range(count):
        data, out = engine_peers.payload(seq, 8), np.zeros(8, np.uint8)
        r = me.irecv(out, peer, tag=seq)
        me.isend(data, peer, tag=seq).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == 8 and (out == data).all()


def test_a_blocked_receive_on_the_only_connection_sleeps_in_its_recv(open_engine, spawn):
    count = 200
    me, child = _echo_child(open_engine, spawn, 2, count)
    before = me.stats()
    _ping_pong(me, 2, count)
    assert child.result() == count
    after = me.stats()
    blocked = after["reads_blocked"] - before["reads_blocked"]
    reads = after["socket_reads"] - before["socket_reads"]
    # the first wait's read went through the poller (no frame had come yet to name the
    # connection); the answers after it came in the blocked recv
    assert count // 2 < blocked <= reads, (blocked, reads)


def test_with_two_connections_a_blocked_receive_waits_in_the_poller(open_engine, spawn):
    count = 50
    me, child = _echo_child(open_engine, spawn, 2, count)
    _, other = _echo_child(open_engine, spawn, 3, 2, me=me)
    _ping_pong(me, 3, 1)                     # both connections open
    before = me.stats()
    _ping_pong(me, 2, count)
    assert child.result() == count
    after = me.stats()
    _ping_pong(me, 3, 1)
    assert other.result() == 2
    assert after["reads_blocked"] == before["reads_blocked"]
    assert after["waits_polled"] > before["waits_polled"]


def test_a_stopped_peer_is_lost_within_the_liveness_timeout_while_a_receive_sleeps_in_its_recv(
        open_engine, spawn, monkeypatch):
    monkeypatch.setenv("COC_LIVENESS_MS", str(LIVENESS_MS))  # read at open
    most = 400
    me, child = _echo_child(open_engine, spawn, 2, most)
    before = me.stats()["reads_blocked"]
    # round trips until one answer came while the receive slept in the recv: the path the
    # receive below takes (an answer that came before the wait began does not count, and
    # under load 20 trips once had none)
    for _ in range(most):
        _ping_pong(me, 2, 1)
        if me.stats()["reads_blocked"] > before:
            break
    assert me.stats()["reads_blocked"] > before
    os.kill(child.proc.pid, signal.SIGSTOP)
    try:   # a receive that outlived the timeout would raise CocTimeoutError, not PeerLost
        with pytest.raises(errors.PeerLost) as info:
            me.irecv(np.zeros(8, np.uint8), 2).wait(TIMEOUT)
        assert info.value.peer == 2
    finally:
        os.kill(child.proc.pid, signal.SIGCONT)


@pytest.mark.skipif(RECVFROM is None, reason="recvfrom's number not known on this machine")
def test_ctrl_c_interrupts_a_receive_asleep_in_the_recv_of_the_only_connection(
        open_engine, spawn):
    count = 20
    me, child = _echo_child(open_engine, spawn, 2, count, scenario="echo_then_wait")
    _ping_pong(me, 2, count)
    assert child.recv() == "waiting"
    # its receive from us sleeps in the recv of its one connection, not in epoll_wait
    # (seen from outside: the system call its main thread is in), however slowly the
    # machine runs it
    deadline = time.monotonic() + TIMEOUT
    while _in_syscall(child.proc.pid) != RECVFROM and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _in_syscall(child.proc.pid) == RECVFROM
    os.kill(child.proc.pid, signal.SIGINT)
    assert child.result(timeout=TIMEOUT) is not None   # interrupted, not waiting for ever


def _in_syscall(pid):
    """The number of the system call the main thread of process ``pid`` is in (-1: none,
    running)."""
    with open(f"/proc/{pid}/syscall") as f:
        first = f.read().split()[0]
    return -1 if first == "running" else int(first)
