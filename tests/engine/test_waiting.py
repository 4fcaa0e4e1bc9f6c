"""How the engine's waits end, as ``Engine.stats()`` counts them (docs/engine.md, "Waiting").

No timing is asserted: the counts say which way each wait went, whatever the machine's load.
"""

import os
import select
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


def _waits_for_late_messages(me, count, capacity=8):
    """Wait ``count`` times for a message to itself that another thread sends a moment later,
    each received into a buffer of ``capacity`` bytes. The sender's blocking ``send`` makes
    no request: an ``isend``'s would be tracked, and the binding's sweep of tracked
    requests could complete the receive before its wait began (a wait not counted)."""
    for i in range(count):
        out = np.zeros(capacity, np.uint8)
        request = me.irecv(out, me.self_id, tag=i)
        sender = threading.Thread(target=lambda i=i: (time.sleep(0.002),
                                                      me.send(np.full(8, i, np.uint8),
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


def _late_send(tx, dest, tag, after):
    """Send 8 bytes from ``tx`` to ``dest`` ``after`` seconds from now, from a thread."""
    sender = threading.Thread(target=lambda: (time.sleep(after), tx.send(b"x" * 8, dest, tag)))
    sender.start()
    return sender


@pytest.mark.parametrize("last_wait", [0.0005, 0.05])
def test_the_progress_thread_takes_the_sockets_back_when_waits_stop(open_engine, monkeypatch,
                                                                   last_wait):
    """The sockets change hands lazily (docs/engine.md, "Waiting"): waits on an engine
    without rings poll the sockets themselves and leave them so when they end. A message
    that comes after the waits stopped — short waits back to back, or one long wait, then
    none — is still received by the progress thread: the engine's fd turns readable with
    no wait, test or look on this side. Liveness is off, so nothing else wakes the
    progress thread: a hand-off that left the sockets to nobody hangs here."""
    monkeypatch.setenv("COC_LIVENESS_MS", "-1")
    rx, tx = open_engine(1, shm=False), open_engine(2, shm=False)
    tx.add_peer(1, rx.address)
    tx.set_route(1, [1])
    for pause in (0.0,) + (0.0005,) * 30 + (last_wait,):
        request = rx.irecv(bytearray(8), 2, 1)
        sender = _late_send(tx, 1, 1, pause)
        request.wait(TIMEOUT)
        sender.join(TIMEOUT)
    for settle in (0.0, 0.0005, 0.005):    # before, during and after the progress thread's looks
        time.sleep(settle)
        request = rx.irecv(bytearray(8), 2, 2)
        rx.drain()
        tx.send(b"y" * 8, 1, 2)
        readable, _, _ = select.select([rx.fileno()], [], [], TIMEOUT)
        assert readable and request.done


@pytest.fixture
def one_cpu():
    """Pin this thread (and the threads it starts: an engine's, the senders) to one CPU,
    as ``taskset -c`` pins a rank; the engine reads its CPUs when it opens. The tie tests
    below describe a pinned path; unpinned, beside two busy loops, the spinner's yields
    ran other programs and its waits took longer than blocking's (5 failures in 8 runs)."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    yield
    os.sched_setaffinity(0, cpus)


def test_waits_that_spinning_cannot_shorten_block_at_once(one_cpu, open_engine):
    """Pinned to one CPU, spinning is the faster way only when its median wait ended while
    spinning and beat blocking by a margin (docs/engine.md, "Waiting"): when every message
    comes a fixed pause after the wait began (an answer through gateways, pinned to one
    CPU, comes after their work whatever the waiter does), the spinning way's waits end
    blocked too, at about the same time, and the engine settles on blocking at once. With
    the margin gone, the choice followed noise and a share of the waits kept spinning in
    vain; with the margin alone, beside two busy loops (wake-ups a fifth and more apart),
    it still did (failed 5 runs in 6 at load 9)."""
    me = open_engine(1, spin_ns=200_000)
    _waits_for_late_messages(me, 240)          # both ways scored, the choice made
    before = me.stats()
    _waits_for_late_messages(me, 80)
    waits = _delta(before, me.stats(), (*ENDINGS, "waits_unspun"))
    assert sum(waits[k] for k in ENDINGS) == 80
    assert waits["waits_unspun"] >= 60, waits  # the rest: the spinning way's rare tries


def test_waits_for_large_messages_choose_their_way_apart(one_cpu, open_engine):
    """A wait for more than 64 KiB lasts about as long spun or blocked, so its way is chosen
    apart from the small waits' (docs/engine.md, "Waiting"): the small waits here (pinned,
    answers 2 ms late: a tie, which blocking wins) settle on blocking at once, and the first waits into 128 KiB buffers still spin first, as an
    engine's waits start (blocking is tried in one 2 ms slot in eight). Sharing one choice,
    they blocked at once from the first."""
    me = open_engine(1, spin_ns=200_000)
    _waits_for_late_messages(me, 240)          # the small waits settle on blocking
    before = me.stats()
    _waits_for_late_messages(me, 16, capacity=128 << 10)
    waits = _delta(before, me.stats(), (*ENDINGS, "waits_unspun"))
    assert sum(waits[k] for k in ENDINGS) == 16
    assert waits["waits_unspun"] <= 8, waits   # the rest: blocking's tries
    before = me.stats()
    _waits_for_late_messages(me, 40)           # and the small waits kept their choice
    assert _delta(before, me.stats(), ("waits_unspun",))["waits_unspun"] >= 30


def test_a_pinned_spinner_reads_the_answer_without_the_poller(open_engine, spawn, monkeypatch):
    """Pinned to one CPU (both ends), a spinner yields before it asks the sockets, and
    after a yield that ran other work (the peer, answering) it reads the connection the
    last frame came on, one read instead of an epoll_wait and a read (docs/engine.md,
    "Waiting"): ``reads_unpolled`` counts those reads. Waits are forced to spin
    (``COC_SPIN_LOAD=ignore``); every message comes back whole."""
    monkeypatch.setenv("COC_SPIN_LOAD", "ignore")
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})   # the engine and the spawned peer see one CPU
    try:
        kwargs = {"shm": False, "spin_ns": 200_000}
        me = open_engine(1, **kwargs)
        count = 300
        child = spawn(2, "echo_after", peer=1, count=count, pauses=(0.0,),
                      engine_kwargs=kwargs)
        me.add_peer(2, child.address)
        me.set_route(2, [2])
        child.connect({1: me.address}, {1: [1]})
        before = me.stats()
        for seq in range(count):
            data, out = engine_peers.payload(seq, 8), np.zeros(8, np.uint8)
            r = me.irecv(out, 2, tag=seq)
            me.isend(data, 2, tag=seq).wait(TIMEOUT)
            assert r.wait(TIMEOUT).count == 8 and (out == data).all()
        assert child.result() == count
    finally:
        os.sched_setaffinity(0, saved)
    got = _delta(before, me.stats(), ("reads_unpolled", "socket_reads"))
    assert 0 < got["reads_unpolled"] <= got["socket_reads"], got


def _requests_alive():
    import gc
    return sum(type(o).__name__ == "EngineRequest" for o in gc.get_objects())


@pytest.mark.parametrize("alloc", [False, True])
def test_a_blocking_receive_waits_without_a_request_object(open_engine, alloc):
    """A blocking receive whose message comes within its first wait slice (50 ms) waits on
    the bare C request (docs/engine.md, "Blocking calls"): while it waits, no
    ``EngineRequest`` exists; a message later than the slice is still received (the
    receive then becomes one and waits on)."""
    me = open_engine(1, shm=False)
    seen = []

    def sender(tag, after):
        deadline = time.monotonic() + after
        while time.monotonic() < deadline:
            seen.append(_requests_alive())   # the receiver waits meanwhile (GIL released)
            time.sleep(0.002)
        me.isend(np.full(8, tag, np.uint8), me.self_id, tag=tag).wait(TIMEOUT)

    for tag, after in ((1, 0.02), (2, 0.12)):
        before = _requests_alive()
        thread = threading.Thread(target=sender, args=(tag, after))
        thread.start()
        if alloc:
            status, message = me.recv_alloc(me.self_id, tag)
            data = np.frombuffer(message, np.uint8)
        else:
            data = np.zeros(8, np.uint8)
            status = me.recv(data, me.self_id, tag)
        thread.join(TIMEOUT)
        assert status.count == 8 and (data == tag).all()
        if tag == 1:
            assert seen and max(seen) == before, seen
