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


def _echo_children(open_engine, spawn, counts):
    """Endpoint 1, opened here, and an echo child per ``{child_id: count}`` connected to it
    over a ring; return endpoint 1 and the children."""
    me, children = open_engine(1, **BLOCK), {}
    for child_id, count in counts.items():
        children[child_id] = spawn(child_id, "echo", peer=1, count=count, engine_kwargs=BLOCK)
        me.add_peer(child_id, children[child_id].address)
        me.set_route(child_id, [child_id])
        children[child_id].connect({1: me.address}, {1: [1]})
    return me, children


def _blocked_trips(me, peer, count):
    """``count`` 8 B round trips with ``peer``, each answer checked; return how many waits
    blocked and how many naps brought data meanwhile."""
    before = me.stats()
    for seq in range(count):
        sent, got = engine_peers.payload(seq, 8), np.zeros(8, np.uint8)
        answer = me.irecv(got, peer, tag=seq)
        me.isend(sent, peer, tag=seq).wait(TIMEOUT)
        assert answer.wait(TIMEOUT).count == 8 and (got == sent).all()
    after = me.stats()
    blocked = sum(after[k] - before[k] for k in ("waits_polled", "waits_slept"))
    return blocked, after["reads_blocked"] - before["reads_blocked"]


def test_a_blocked_wait_on_the_only_ring_naps_without_the_doorbell(open_engine, spawn):
    count = 200
    me, children = _echo_children(open_engine, spawn, {2: count})
    _blocked_trips(me, 2, 1)                   # the ring open
    blocked, naps = _blocked_trips(me, 2, count - 1)
    assert children[2].result() == count
    # most answers find the waiter blocked and come in its nap (before: through the
    # doorbell and the poller); an answer that came before the nap began does not
    assert blocked > count // 2 and naps > count // 2, (blocked, naps)


def test_with_two_rings_a_blocked_wait_waits_in_the_poller(open_engine, spawn):
    count = 50
    me, children = _echo_children(open_engine, spawn, {2: count + 1, 3: 2})
    _blocked_trips(me, 2, 1)
    _blocked_trips(me, 3, 1)                   # both rings open
    blocked, naps = _blocked_trips(me, 2, count)
    _blocked_trips(me, 3, 1)
    assert children[2].result() == count + 1 and children[3].result() == 2
    assert blocked > count // 2 and naps == 0, (blocked, naps)


def test_a_stopped_peer_is_lost_within_the_liveness_timeout_while_a_wait_naps(
        open_engine, spawn, monkeypatch):
    monkeypatch.setenv("COC_LIVENESS_MS", str(LIVENESS_MS))  # read at open
    most = 400
    me, children = _echo_children(open_engine, spawn, {2: most})
    # round trips until one answer came in a nap: the path the receive below takes (an
    # answer that came before the nap began does not count)
    for _ in range(most):
        if _blocked_trips(me, 2, 1)[1]:
            break
    else:
        pytest.fail(f"none of {most} answers came while the wait napped")
    os.kill(children[2].proc.pid, signal.SIGSTOP)
    try:   # a receive that outlived the timeout would raise CocTimeoutError, not PeerLost
        with pytest.raises(errors.PeerLost) as info:
            me.irecv(np.zeros(8, np.uint8), 2).wait(TIMEOUT)
        assert info.value.peer == 2
    finally:
        os.kill(children[2].proc.pid, signal.SIGCONT)
