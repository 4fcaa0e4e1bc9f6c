"""How the engine's waits end, as ``Engine.stats()`` counts them (docs/engine.md, "Waiting").

No timing is asserted: the counts say which way each wait went, whatever the machine's load.
"""

import threading
import time

import numpy as np
import pytest

import engine_peers
from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
ENDINGS = ("waits_at_once", "waits_spun", "waits_polled", "waits_slept")


@pytest.fixture(autouse=True)
def _no_spin_override(monkeypatch):
    """``COC_SPIN_NS`` overrides every engine's ``spin_ns``: these tests set their own."""
    monkeypatch.delenv("COC_SPIN_NS", raising=False)


def _delta(before, after, keys):
    return {k: after[k] - before[k] for k in keys}


def _waits_for_late_messages(me, count):
    """Wait ``count`` times for a message to itself that another thread sends a moment later."""
    for i in range(count):
        out = np.zeros(8, np.uint8)
        request = me.irecv(out, me.self_id, tag=i)
        sender = threading.Thread(target=lambda i=i: (time.sleep(0.002),
                                                      me.isend(np.full(8, i, np.uint8),
                                                               me.self_id, tag=i)))
        sender.start()
        request.wait(TIMEOUT)
        sender.join(TIMEOUT)
        assert out[0] == i


def test_every_wait_ends_one_way_and_is_counted_once(open_engine):
    me = open_engine(1, spin_ns=100_000)
    before = me.stats()
    _waits_for_late_messages(me, 20)
    after = me.stats()
    assert sum(_delta(before, after, ENDINGS).values()) == 20
    assert 2_000 <= after["spin_budget_ns"] <= 100_000      # bounded by [2 µs, spin_ns]


def test_a_look_is_not_a_wait(open_engine):
    """A wait with timeout 0 (the binding's post-and-look-once) neither counts nor teaches."""
    me = open_engine(1, spin_ns=100_000)
    out = np.zeros(8, np.uint8)
    request = me.irecv(out, me.self_id, tag=3)
    before = me.stats()
    for _ in range(10):
        with pytest.raises(errors.CocTimeoutError):
            request.wait(timeout=0)
    after = me.stats()
    keys = (*ENDINGS, "waits_unspun", "waits_contended", "spin_ns", "spin_budget_ns")
    assert _delta(before, after, keys) == dict.fromkeys(keys, 0)
    me.isend(np.ones(8, np.uint8), me.self_id, tag=3).wait(TIMEOUT)
    request.wait(TIMEOUT)


def test_an_engine_that_never_spins_blocks_every_wait(open_engine):
    me = open_engine(1, spin_ns=-1)
    before = me.stats()
    _waits_for_late_messages(me, 10)
    waits = _delta(before, me.stats(), (*ENDINGS, "waits_unspun", "spin_ns"))
    assert waits["waits_spun"] == 0 and waits["spin_ns"] == 0
    blocked = waits["waits_polled"] + waits["waits_slept"]
    assert blocked + waits["waits_at_once"] == 10
    assert waits["waits_unspun"] >= blocked


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_spinning_waits_of_every_length_deliver_every_message(open_engine, spawn, monkeypatch,
                                                               transport):
    """Waits forced to spin (``COC_SPIN_LOAD=ignore``, both ends) over the rings or a
    socket, for answers that come at once, after the spinner stopped leaving the sockets
    to the progress thread (20 µs) and after it blocked: every message comes back whole,
    small and rendezvous-sized, and every wait is counted as one ending."""
    monkeypatch.setenv("COC_SPIN_LOAD", "ignore")
    kwargs = {"eager_limit": 4096, "shm": transport == "shm", "spin_ns": 200_000}
    me = open_engine(1, **kwargs)
    pauses = (0.0, 50e-6, 0.002)               # the child's pause before it answers
    sizes = (8, 100, 8, 64 << 10)
    count = len(pauses) * len(sizes) * 3
    child = spawn(2, "echo_after", peer=1, count=count, pauses=pauses, engine_kwargs=kwargs)

    def address(a):  # the tcp case hides the same-host address
        return " ".join(w for w in a.split() if transport != "tcp" or w.startswith("tcp:"))

    me.add_peer(2, address(child.address))
    me.set_route(2, [2])
    child.connect({1: address(me.address)}, {1: [1]})
    before = me.stats()
    for seq in range(count):
        size = sizes[seq % len(sizes)]
        data, out = engine_peers.payload(seq, size), np.zeros(size, np.uint8)
        r = me.irecv(out, 2, tag=seq)
        me.isend(data, 2, tag=seq).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size and (out == data).all()
    assert child.result() == count
    waits = _delta(before, me.stats(), ENDINGS)
    assert count <= sum(waits.values()) <= 2 * count   # a send's wait and a receive's
