"""A blocked waiter whose engine's only connection is a shared-memory ring naps on the ring
itself (docs/engine.md, "Waiting"): the writer wakes it with one futex wake where the
doorbell cost it a socket write and the waiter a poller's wake-up and a read of the
doorbell's bytes. ``Engine.stats()["reads_blocked"]`` counts the naps that brought data.

No timing is asserted: the counts say which way the waits went, whatever the load.
"""

import os
import signal

import numpy as np
import pytest

import engine_peers
from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
BLOCK = {"shm": True, "spin_ns": -1}   # waits block at once, over a ring
LIVENESS_MS = 600


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch):
    """These tests set their own spin cap and liveness timeout."""
    monkeypatch.delenv("COC_SPIN_NS", raising=False)
    monkeypatch.delenv("COC_LIVENESS_MS", raising=False)


def _echo_child(open_engine, spawn, child_id, count, me=None):
    """Endpoint 1 (``me``, opened here unless given) and an echo child ``child_id``
    connected to it over a ring; return both."""
    me = me or open_engine(1, **BLOCK)
    child = spawn(child_id, "echo", peer=1, count=count, engine_kwargs=BLOCK)
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


def _blocked_trips(me, peer, count):
    """Ping-pong ``count`` times; return (waits that blocked, naps that brought data)."""
    before = me.stats()
    _ping_pong(me, peer, count)
    after = me.stats()
    blocked = sum(after[k] - before[k] for k in ("waits_polled", "waits_slept"))
    return blocked, after["reads_blocked"] - before["reads_blocked"]


def test_a_blocked_wait_on_the_only_ring_naps_without_the_doorbell(open_engine, spawn):
    count = 200
    me, child = _echo_child(open_engine, spawn, 2, count)
    _ping_pong(me, 2, 1)                       # the ring open
    blocked, naps = _blocked_trips(me, 2, count - 1)
    assert child.result() == count
    # most answers find the waiter blocked and come in its nap (before: through the
    # doorbell and the poller); an answer that came before the nap began does not
    assert blocked > count // 2 and naps > count // 2, (blocked, naps)


def test_with_two_rings_a_blocked_wait_waits_in_the_poller(open_engine, spawn):
    count = 50
    me, child = _echo_child(open_engine, spawn, 2, count + 1)
    _, other = _echo_child(open_engine, spawn, 3, 2, me=me)
    _ping_pong(me, 2, 1)
    _ping_pong(me, 3, 1)                       # both rings open
    blocked, naps = _blocked_trips(me, 2, count)
    _ping_pong(me, 3, 1)
    assert child.result() == count + 1 and other.result() == 2
    assert blocked > count // 2 and naps == 0, (blocked, naps)


def test_a_stopped_peer_is_lost_within_the_liveness_timeout_while_a_wait_naps(
        open_engine, spawn, monkeypatch):
    monkeypatch.setenv("COC_LIVENESS_MS", str(LIVENESS_MS))  # read at open
    me, child = _echo_child(open_engine, spawn, 2, 20)
    blocked, naps = _blocked_trips(me, 2, 20)
    assert naps > 0, (blocked, naps)            # the path the receive below takes
    os.kill(child.proc.pid, signal.SIGSTOP)
    try:   # a receive that outlived the timeout would raise CocTimeoutError, not PeerLost
        with pytest.raises(errors.PeerLost) as info:
            me.irecv(np.zeros(8, np.uint8), 2).wait(TIMEOUT)
        assert info.value.peer == 2
    finally:
        os.kill(child.proc.pid, signal.SIGCONT)
