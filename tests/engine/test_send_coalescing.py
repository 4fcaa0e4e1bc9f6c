"""Send coalescing: a burst of sends to one peer leaves in a few writes, a lone send at once.

The engine holds an endpoint's frame posted within ``send_hold_ns`` of the one before it on
the same socket, and sends what it holds together when the caller next waits or looks, when
32 frames wait, or when the hold runs out (docs/engine.md, "Send coalescing"). These tests
watch it from outside: the sender's system-call counters (``socket_writes``), what it says
it held (``frames_held``) and the bytes the receiver gets, in order. Holds are set long
(or the pauses between sends longer than the hold), so a slow machine changes nothing.
"""

import time

import pytest

import engine_peers
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
BURST = 64


def _pair(open_engine, spawn, hold_ns, count):
    """This process as endpoint 1 (holding ``hold_ns``), a child receiving ``count`` 8 B
    messages as endpoint 2, over a socket (shared memory has no writes to save, and never
    holds); the connection is opened by a first message, already sent."""
    me = open_engine(1, send_hold_ns=hold_ns, shm=False)
    child = spawn(2, "recv_stream", source=1, sizes=[8] * count, engine_kwargs={"shm": False})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    child.connect({1: me.address}, {1: [1]})
    assert child.recv() == "posted"
    me.isend(engine_peers.payload(0, 8), 2).wait(TIMEOUT)
    return me, child


def _delta(before, after, key):
    return after[key] - before[key]


def _burst(me, child):
    """Post BURST sends, then wait for them; return (frames held, socket writes)."""
    before = me.stats()
    reqs = [me.isend(engine_peers.payload(i, 8), 2) for i in range(1, BURST + 1)]
    for r in reqs:
        r.wait(TIMEOUT)
    seqs, intact = child.result()
    after = me.stats()
    assert seqs == list(range(BURST + 1)) and intact
    return _delta(before, after, "frames_held"), _delta(before, after, "socket_writes")


def test_a_burst_of_sends_leaves_in_few_writes(open_engine, spawn):
    held, writes = _burst(*_pair(open_engine, spawn, 1_000_000_000, BURST + 1))
    # every frame after the first waits (the first too when the opening message went on
    # an open connection less than the hold before it: the child may have dialed first);
    # 32 leave when 32 wait, the rest at the first wait
    assert held >= BURST - 1
    assert writes <= BURST // 8, f"{writes} writes for a burst of {BURST}"


@pytest.mark.parametrize("where", ["argument", "environment"])
def test_a_negative_hold_writes_every_frame(open_engine, spawn, monkeypatch, where):
    if where == "environment":
        monkeypatch.setenv("COC_SEND_HOLD_NS", "-1")
    held, writes = _burst(*_pair(open_engine, spawn, -1 if where == "argument" else 0,
                                 BURST + 1))
    assert held == 0
    assert writes >= BURST


def test_held_frames_leave_without_a_wait(open_engine, spawn):
    """A sender that posts and never waits still delivers: the hold runs out."""
    me, child = _pair(open_engine, spawn, 200_000_000, 3)
    held = me.stats()["frames_held"]
    first = me.isend(engine_peers.payload(1, 8), 2)
    second = me.isend(engine_peers.payload(2, 8), 2)  # held; no wait, test or look follows
    seqs, intact = child.result()
    assert seqs == [0, 1, 2] and intact
    assert me.stats()["frames_held"] - held >= 1
    del first, second


def test_a_lone_send_is_not_held(open_engine, spawn):
    """Sends further apart than the hold each leave at once (a pause only lengthens)."""
    hold_s = 0.05
    me, child = _pair(open_engine, spawn, int(hold_s * 1e9), 3)
    for seq in (1, 2):
        time.sleep(4 * hold_s)
        me.isend(engine_peers.payload(seq, 8), 2).wait(TIMEOUT)
    seqs, intact = child.result()
    assert seqs == [0, 1, 2] and intact
    assert me.stats()["frames_held"] == 0


def test_a_gateway_forwards_a_held_burst_in_few_writes(open_engine, spawn, gateway):
    """1 -> gateway 10 -> 2: the burst reaches the gateway in a few writes, and the
    gateway forwards what one read brings in one write (docs/engine.md, "The gateway
    daemon"): system calls per frame fall at both hops."""
    me = open_engine(1, send_hold_ns=1_000_000_000, shm=False)
    child = spawn(2, "recv_stream", source=1, sizes=[8] * (BURST + 1),
                  engine_kwargs={"shm": False})
    gw = gateway(10, peers={1: me.address, 2: child.address},
                 routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    child.connect({10: gw.address}, {1: [10]})
    assert child.recv() == "posted"
    me.isend(engine_peers.payload(0, 8), 2).wait(TIMEOUT)
    before, gw_before = me.stats(), gw.stats()
    reqs = [me.isend(engine_peers.payload(i, 8), 2) for i in range(1, BURST + 1)]
    for r in reqs:
        r.wait(TIMEOUT)
    seqs, intact = child.result()
    after, gw_after = me.stats(), gw.stats()
    assert seqs == list(range(BURST + 1)) and intact
    assert _delta(before, after, "frames_held") >= BURST - 1
    assert _delta(before, after, "socket_writes") <= BURST // 8
    assert _delta(gw_before, gw_after, "frames_forwarded") >= BURST
    for key in ("socket_reads", "socket_writes"):
        assert _delta(gw_before, gw_after, key) <= BURST // 4, key
