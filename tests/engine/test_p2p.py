"""Point-to-point through the binding between real processes on loopback."""

import gc
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import engine_peers
from coc import errors
from coc._native import engine
from engine_peers import sigstopped
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
EAGER = 4096  # set on every engine here, so both protocols are exercised on purpose


@pytest.fixture
def echo_pair(open_engine, spawn):
    """This process as endpoint 1 and an echo child as endpoint 2, directly connected."""
    def make(count):
        me = open_engine(1, eager_limit=EAGER)
        child = spawn(2, "echo", peer=1, count=count, engine_kwargs={"eager_limit": EAGER})
        me.add_peer(2, child.address)
        me.set_route(2, [2])
        child.connect({1: me.address}, {1: [1]})
        return me, child
    return make


def _kinds(size):
    """The same bytes as each buffer type a user may send."""
    data = engine_peers.payload(7, size)
    return {"numpy": data, "bytes": data.tobytes(), "bytearray": bytearray(data.tobytes()),
            "memoryview": memoryview(bytearray(data.tobytes()))}


@pytest.mark.parametrize("size", [0, 100, EAGER, EAGER + 1, 3 << 20],
                         ids=["empty", "eager", "eager-limit", "rendezvous", "rendezvous-3MiB"])
def test_round_trip_every_buffer_kind(echo_pair, size):
    me, child = echo_pair(4)
    for kind, data in _kinds(size).items():
        out = np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, 2, tag=5)
        me.isend(data, 2, tag=5).wait(TIMEOUT)
        st = r.wait(TIMEOUT)
        assert (st.source, st.tag, st.context, st.count) == (2, 5, 0, size), kind
        assert out.tobytes() == bytes(data), kind
    assert child.result() == 4


def test_receive_fills_the_callers_memory_in_place(echo_pair):
    me, child = echo_pair(4)
    for size in (100, 1 << 20):
        backing = bytearray(size + 64)
        window = memoryview(backing)[32:32 + size]  # a view into the middle of a bytearray
        arr = np.zeros(size, dtype=np.uint8)
        address = arr.ctypes.data
        r1 = me.irecv(window, 2, tag=1)
        me.isend(engine_peers.payload(3, size), 2, tag=1).wait(TIMEOUT)
        r1.wait(TIMEOUT)
        assert backing[:32] == bytes(32) and backing[-32:] == bytes(32)
        assert engine_peers.seq_of(window) == 3
        r2 = me.irecv(arr, 2, tag=1)
        me.isend(engine_peers.payload(4, size), 2, tag=1).wait(TIMEOUT)
        r2.wait(TIMEOUT)
        assert arr.ctypes.data == address and engine_peers.seq_of(arr) == 4
    assert child.result() == 4


def test_receive_buffers_must_be_writable_and_contiguous(open_engine):
    me = open_engine(1)
    with pytest.raises(BufferError):
        me.irecv(b"read-only bytes")
    with pytest.raises((BufferError, ValueError)):
        me.irecv(np.zeros((4, 4), dtype=np.uint8)[:, 1])


def test_dropped_request_keeps_its_buffer_until_done(open_engine, spawn):
    me = open_engine(1)
    child = spawn(2, "send_tagged", dest=1, items=[(9, b"x" * 1000)])
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    buf = bytearray(1000)
    me.irecv(buf, 2, 9)  # the request object is dropped at once
    with pytest.raises(BufferError):
        buf.extend(b"more")  # still exported to the engine: cannot move
    child.connect({1: me.address}, {1: [1]})
    assert child.result() == 1
    deadline = time.monotonic() + TIMEOUT
    while bytes(buf) != b"x" * 1000:
        assert time.monotonic() < deadline, "message never landed in the dropped receive"
        time.sleep(0.01)


def _exported(buf):
    """True while ``buf`` (a bytearray) is exported to the engine: it cannot grow."""
    try:
        buf.append(0)
    except BufferError:
        return True
    buf.pop()
    return False


def test_dropped_requests_let_go_of_their_buffers(open_engine):
    """Requests dropped without a wait are forgotten by a later sweep of the engine's
    pending requests, which releases their buffers; also after sweeps that found a window
    of receives in flight (which make the sweeps rarer, not absent)."""
    me = open_engine(1)
    window = [me.irecv(bytearray(8), 1, 1) for _ in range(200)]
    bufs = [bytearray(8) for _ in range(2000)]
    for buf in bufs:
        me.isend(buf, 1, 2)                 # sent to itself; both requests dropped at once
        me.irecv(bytearray(8), 1, 2)
    held = sum(map(_exported, bufs))
    assert held <= 512, f"{held} of 2000 dropped sends still hold their buffers"
    for r in window:
        assert r.cancel()


def test_many_concurrent_messages_arrive_in_order_per_context(open_engine, spawn):
    sizes = [(i * 7919) % (3 * EAGER) + 8 for i in range(1500)] + [64 << 10] * 20
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "send_stream", dest=1, sizes=sizes, contexts=3,
                  engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    child.connect({1: me.address}, {1: [1]})
    seen = {0: [], 1: [], 2: []}
    buf = np.empty(max(sizes), dtype=np.uint8)
    for i in range(len(sizes)):
        ctx = i % 3
        st = me.irecv(buf, 2, engine.ANY_TAG, context=ctx).wait(TIMEOUT)
        seen[ctx].append((engine_peers.seq_of(buf), st.tag, st.count))
    for ctx, got in seen.items():
        assert [s for s, _, _ in got] == list(range(ctx, len(sizes), 3))
        assert all(tag == s % 1000 and count == sizes[s] for s, tag, count in got)
    assert child.result() == len(sizes)


def test_any_source_and_any_tag_match_by_posting_order(open_engine, spawn):
    me = open_engine(1)
    kids = [spawn(i, "send_tagged", dest=1, items=[(10 + i, bytes([i]) * (i * 1000))])
            for i in (2, 3)]
    for kid in kids:
        me.add_peer(kid.id, kid.address)
        me.set_route(kid.id, [kid.id])
    buf = bytearray(10000)
    only3 = me.irecv(bytearray(10000), engine.ANY_SOURCE, tag=13)
    anything = me.irecv(buf, engine.ANY_SOURCE, engine.ANY_TAG)
    for kid in kids:
        kid.connect({1: me.address}, {1: [1]})
    st3 = only3.wait(TIMEOUT)
    st = anything.wait(TIMEOUT)
    assert (st3.source, st3.tag, st3.count) == (3, 13, 3000)
    assert (st.source, st.tag, st.count) == (2, 12, 2000)
    assert bytes(buf[:2000]) == b"\x02" * 2000
    assert [k.result() for k in kids] == [1, 1]


@pytest.mark.parametrize("size", [1000, 1 << 20], ids=["eager", "rendezvous"])
def test_truncation_names_source_tag_and_sizes(open_engine, spawn, size):
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "send_tagged", dest=1, items=[(7, b"t" * size)],
                  engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    small = bytearray(100)
    req = me.irecv(small, 2, 7)
    child.connect({1: me.address}, {1: [1]})
    with pytest.raises(errors.TruncationError) as info:
        req.wait(TIMEOUT)
    exc = info.value
    assert (exc.source, exc.tag, exc.size, exc.capacity) == (2, 7, size, 100)
    assert "truncated" in engine.strerror(exc.code)     # the engine's own code travels with it
    for word in ("endpoint 2", "tag 7", str(size), "100"):
        assert word in str(exc)
    assert bytes(small) == b"t" * 100  # the first capacity bytes are delivered
    child.result()


def test_completed_operations_are_counted_also_with_an_error(open_engine, spawn):
    """``requests_completed`` is the watchdog's progress (coc/rendezvous.py): it moves with
    every receive that ends, a truncated one included."""
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "send_tagged", dest=1, items=[(7, b"x" * 10), (8, b"y" * 1000)],
                  engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    before = me.stats()["requests_completed"]
    whole, short = me.irecv(bytearray(100), 2, 7), me.irecv(bytearray(10), 2, 8)
    child.connect({1: me.address}, {1: [1]})
    assert whole.wait(TIMEOUT).count == 10
    with pytest.raises(errors.TruncationError):
        short.wait(TIMEOUT)
    assert me.stats()["requests_completed"] - before == 2
    child.result()


def test_probe_reports_size_before_receive(open_engine, spawn):
    me = open_engine(1, eager_limit=EAGER)
    assert me.iprobe() is None
    with pytest.raises(errors.CocTimeoutError):
        me.probe(timeout=scaled(0.1))
    sizes = {3: 1000, 4: 5 << 20}  # one eager, one rendezvous (only announced)
    child = spawn(2, "send_tagged", dest=1, items=[(t, b"p" * n) for t, n in sizes.items()],
                  engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    child.connect({1: me.address}, {1: [1]})
    st = me.probe(2, tag=4, timeout=TIMEOUT)
    assert (st.source, st.tag, st.count) == (2, 4, sizes[4])
    assert me.stats()["unexpected_bytes"] < sizes[4], "rendezvous payload sent unasked"
    assert me.iprobe(2, 3) == engine.EngineStatus(2, 3, 0, sizes[3])
    for tag, n in sizes.items():
        buf = bytearray(me.iprobe(2, tag).count)
        assert me.irecv(buf, 2, tag).wait(TIMEOUT).count == n
        assert buf == b"p" * n
    assert me.iprobe() is None
    child.result()


def test_wait_timeout_leaves_request_pending_and_cancel_ends_it(open_engine):
    me = open_engine(1)
    req = me.irecv(bytearray(8), engine.ANY_SOURCE)
    t0 = time.monotonic()
    with pytest.raises(errors.CocTimeoutError, match="any source"):
        req.wait(0.2)
    assert 0.15 < time.monotonic() - t0 < TIMEOUT     # waited, then gave up
    assert not req.done and req.test() is None
    assert req.cancel() is True
    with pytest.raises(errors.CancelledError):
        req.wait(TIMEOUT)


def test_send_without_route_is_refused(open_engine):
    me = open_engine(1)
    with pytest.raises(errors.NoRouteError):
        me.isend(b"hello", 99).wait(TIMEOUT)


def test_close_is_idempotent_and_fails_pending_requests(open_engine):
    me = open_engine(1)
    req = me.irecv(bytearray(8))
    buf_kept = bytearray(8)
    req2 = me.irecv(buf_kept)
    del req2
    me.close()
    me.close()
    assert me.closed
    with pytest.raises(errors.ClosedError):
        req.wait(TIMEOUT)
    buf_kept.extend(b"free")  # released by close
    with pytest.raises(errors.ClosedError):
        me.isend(b"x", 1)


def test_engine_collected_open_warns():
    eng = engine.Engine(1, engine_peers.SECRET)
    with pytest.warns(ResourceWarning, match="unclosed"):
        del eng
        gc.collect()


def test_forked_child_does_not_close_parents_engine(echo_pair):
    me, child = echo_pair(1)
    pid = os.fork()
    if pid == 0:  # the child: dropping and closing must leave the parent's engine alone
        code = 0
        try:
            me.close()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    out = bytearray(5)
    r = me.irecv(out, 2)
    me.isend(b"alive", 2).wait(TIMEOUT)
    r.wait(TIMEOUT)
    assert out == b"alive"
    assert child.result() == 1


def test_sender_memory_stays_bounded_when_receiver_stops_reading(open_engine, spawn):
    # Eager sends complete once copied; the copies must not pile up without bound.
    msg, count, bound = 32 << 10, 6400, 64 << 20  # 200 MiB of eager messages
    me = open_engine(1, eager_limit=2 * msg)
    child = spawn(2, "recv_stream", source=1, sizes=[msg] * count,
                  engine_kwargs={"eager_limit": 2 * msg})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    child.connect({1: me.address}, {1: [1]})
    assert child.recv() == "posted"
    data = engine_peers.payload(0, msg)
    baseline = engine_peers.rss_bytes(os.getpid())
    with sigstopped(child.proc.pid):
        sends = [me.isend(data, 2) for _ in range(count)]
        time.sleep(2)
        grown = engine_peers.rss_bytes(os.getpid()) - baseline
    for r in sends:
        r.wait(120)
    child.result(timeout=scaled(120))
    assert grown < bound, f"the sender grew by {grown >> 20} MiB while the receiver slept"


def test_wrong_secret_is_rejected_and_nothing_delivered(open_engine, spawn):
    me = open_engine(1, eager_limit=EAGER)
    stranger = spawn(2, "try_sends", dest=1, sizes=[100, 1 << 20], secret=b"z" * 32,
                     engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, stranger.address)
    me.set_route(2, [2])
    req = me.irecv(bytearray(1 << 20), engine.ANY_SOURCE)
    stranger.connect({1: me.address}, {1: [1]})
    # Eager and rendezvous alike: the stranger learns that nothing got through.
    assert None not in stranger.result(), "a send with the wrong secret reported success"
    with pytest.raises(errors.CocTimeoutError):
        req.wait(1.0)
    assert me.stats()["auth_failures"] >= 1
    assert any("auth" in line.lower() for line in me.take_log())
    req.cancel()


def test_messages_sent_just_before_exit_are_delivered(open_engine, spawn):
    # A sender that closes its engine right after its sends completed (as a program that
    # ends does) must not lose them, even when the connection was still being set up.
    items = [(t, bytes([t]) * 100) for t in range(5)]
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "send_tagged", dest=1, items=items, hold=False,
                  engine_kwargs={"eager_limit": EAGER})
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    bufs = [bytearray(100) for _ in items]
    reqs = [me.irecv(b, 2, t) for b, (t, _) in zip(bufs, items)]
    child.connect({1: me.address}, {1: [1]})
    assert child.result() == len(items)
    for r in reqs:
        r.wait(TIMEOUT)
    assert [bytes(b) for b in bufs] == [d for _, d in items]


def test_peer_dying_mid_message_raises_peer_lost(open_engine, spawn):
    size = 512 << 20
    me = open_engine(1)
    child = spawn(2, "die_mid_send", dest=1, size=size, after=0.05)
    me.add_peer(2, child.address)
    me.set_route(2, [2])
    buf = np.empty(size, dtype=np.uint8)
    req = me.irecv(buf, 2)
    child.connect({1: me.address}, {1: [1]})
    with pytest.raises(errors.PeerLost, match="endpoint 2") as info:
        req.wait(TIMEOUT)
    assert info.value.peer == 2
    child.proc.join(TIMEOUT)
    assert child.proc.exitcode == -signal.SIGKILL


def _sleeping(pid):
    """Return True when the main thread of process ``pid`` sleeps (state S in /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


@pytest.mark.parametrize("how", ["wait", "probe"])
def test_ctrl_c_interrupts_a_blocked_wait(spawn, how):
    child = spawn(2, "wait_forever", how=how)
    child.connect({}, {})
    assert child.recv() == "waiting"
    # signal it once its main thread sleeps (in the wait), however slowly a busy machine runs it
    deadline = time.monotonic() + TIMEOUT
    while not _sleeping(child.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = time.monotonic()
    os.kill(child.proc.pid, signal.SIGINT)
    stopped = child.result(timeout=TIMEOUT)
    assert stopped is not None and stopped - sent < TIMEOUT    # interrupted, not waiting for ever


def test_threads_waiting_on_one_request_all_see_it_complete(echo_pair):
    me, child = echo_pair(1)
    out = bytearray(64)
    req = me.irecv(out, 2)
    with ThreadPoolExecutor(4) as pool:
        waits = [pool.submit(req.wait, TIMEOUT) for _ in range(4)]
        time.sleep(0.1)  # all four inside the wait
        me.isend(b"w" * 64, 2).wait(TIMEOUT)
        statuses = [w.result(TIMEOUT) for w in waits]
    assert all(st == statuses[0] and st.count == 64 for st in statuses)
    assert out == b"w" * 64
    assert child.result() == 1


def test_close_from_another_thread_ends_a_wait(open_engine):
    me = open_engine(1)
    req = me.irecv(bytearray(8))
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(req.wait, TIMEOUT)
        time.sleep(0.1)
        t0 = time.monotonic()
        me.close()
        with pytest.raises(errors.ClosedError):
            waiting.result(TIMEOUT)
    assert time.monotonic() - t0 < TIMEOUT


def test_peer_delay_emulates_latency(echo_pair):
    me, child = echo_pair(2)
    out = bytearray(8)
    for delay in (0.0, 0.05):
        me.set_peer_delay(2, delay)
        r = me.irecv(out, 2)
        t0 = time.monotonic()
        me.isend(b"delayed!", 2).wait(TIMEOUT)
        r.wait(TIMEOUT)
        elapsed = time.monotonic() - t0
        assert delay <= elapsed < delay + TIMEOUT     # the delay is applied (at least)
    assert child.result() == 2


@pytest.mark.parametrize("transport", ["shm", "unix", "tcp"])
def test_round_trip_over_every_transport(open_engine, spawn, transport):
    kwargs = {"eager_limit": EAGER, "shm": transport == "shm"}
    me = open_engine(1, **kwargs)
    child = spawn(2, "echo", peer=1, count=2, engine_kwargs=kwargs)

    def address(a):  # the tcp case hides the same-host address
        return " ".join(w for w in a.split() if transport != "tcp" or w.startswith("tcp:"))

    me.add_peer(2, address(child.address))
    me.set_route(2, [2])
    child.connect({1: address(me.address)}, {1: [1]})
    for size in (100, 3 << 20):
        data, out = engine_peers.payload(size, size), np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, 2)
        me.isend(data, 2).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size and (out == data).all()
    assert child.result() == 2


def test_a_peer_with_another_secret_fails_sends_as_authentication_naming_its_address(
        open_engine):
    me = open_engine(1)
    stranger = open_engine(2, secret=b"z" * 32)
    me.add_peer(2, stranger.address)
    me.set_route(2, [2])
    with pytest.raises(errors.AuthenticationError) as info:
        me.isend(b"for a stranger", 2).wait(TIMEOUT)
    assert str(info.value) == (
        f"send to endpoint 2 (tag 0): endpoint 2 at {stranger.address} failed authentication: "
        "the two ends do not hold the same key for this pair of endpoints (is it part "
        "of this job, and the endpoint it claims to be?)")
    assert not isinstance(info.value, errors.PeerLost)
    assert any("auth" in line.lower() and "endpoint 2" in line for line in me.take_log())


def test_pending_lists_unfinished_operations_with_peer_tag_context_and_size(open_engine):
    me = open_engine(1)
    assert me.pending() == []
    req = me.irecv(bytearray(24), 5, tag=7, context=16)
    assert me.pending() == [{"op": "recv", "peer": 5, "tag": 7, "context": 16, "size": 24}]
    req.cancel()
    assert me.pending() == []


def test_a_receive_from_an_exited_peer_fails_after_messages_it_sent_matched(echo_pair):
    me, child = echo_pair(1)
    data = engine_peers.payload(3, 100)
    me.isend(data, 2, tag=1).wait(TIMEOUT)
    first = np.empty_like(data)
    me.irecv(first, 2, tag=1).wait(TIMEOUT)                     # the echo: already here
    late = me.irecv(np.empty_like(data), 2, tag=9)
    me.peer_exited(2, settle=0.1)
    with pytest.raises(errors.PeerExited, match="endpoint 2 exited") as caught:
        late.wait(TIMEOUT)
    assert (caught.value.peer, caught.value.waiter, caught.value.tag) == (2, 1, 9)
    polled = me.irecv(np.empty_like(data), 2, tag=9)
    deadline = time.monotonic() + TIMEOUT
    with pytest.raises(errors.PeerExited):                      # test() fails it too
        while polled.test() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert np.array_equal(first, data) and me.pending() == []
