"""Gateway failover at the engine: a gateway of a two-member set dies mid-stream (kill -9,
SIGSTOP) and every message still arrives once, intact and in order.

Endpoints 1 (sender) and 2 (receiver) run in this process; the gateways are real daemon
processes (:class:`coc.gateway.GatewayProcess`) that the tests kill. Two shapes:
- one tier: both endpoints reach gateways 10 and 11 directly;
- two tiers: 1 -> {10, 11} -> {20, 21} -> 2, so a gateway dying on the far side is
  noticed by a gateway, which tells the sender with a PATH frame.
"""

import os
import random
import signal
import time

import numpy as np
import pytest

from coc import errors
from coc.bench.engine import tcp_only as _tcp
from engine_peers import gateway_log, sigstopped, wait_for_log
from hang_bounds import scaled

SIZES = (8, 1000, 65536, 300_000, 2_000_000)   # eager and rendezvous (several fragments)
LIVENESS_MS = 1500


@pytest.fixture(autouse=True)
def _quick_liveness(monkeypatch):
    """Liveness timeout short enough for a test (engines and daemons read it at open)."""
    monkeypatch.setenv("COC_LIVENESS_MS", str(LIVENESS_MS))


def message(i):
    """Message i: its index in the first 8 bytes, then i % 251."""
    buf = np.full(SIZES[i % len(SIZES)], i % 251, dtype=np.uint8)
    buf[:8] = np.frombuffer(np.uint64(i).tobytes(), dtype=np.uint8)[: min(8, buf.size)]
    return buf


def intact(i, buf):
    want = message(i)
    return buf.size == want.size and bool((buf == want).all())


def build(open_engine, gateway, two_tier):
    """Return (sender, receiver, {name: gateway daemon}) wired as described above."""
    a, b = open_engine(1), open_engine(2)
    if not two_tier:
        gws = {name: gateway(gid, peers={1: a.address, 2: b.address},
                             routes={1: [[1, 1]], 2: [[2, 1]]})
               for name, gid in (("g1", 10), ("g2", 11))}
        for eng, other in ((a, 2), (b, 1)):
            for gid, name in ((10, "g1"), (11, "g2")):
                eng.add_peer(gid, gws[name].address)
            eng.set_route(other, [10, 11])
        return a, b, gws
    near = {name: gateway(gid, peers={1: a.address}, routes={1: [[1, 1]], 2: [[20, 1], [21, 1]]})
            for name, gid in (("ga1", 10), ("ga2", 11))}
    far = {name: gateway(gid, peers={2: b.address}, routes={2: [[2, 1]], 1: [[10, 1], [11, 1]]})
           for name, gid in (("gb1", 20), ("gb2", 21))}
    for gw in near.values():
        gw.update(peers={20: far["gb1"].address, 21: far["gb2"].address})
    for gw in far.values():
        gw.update(peers={10: near["ga1"].address, 11: near["ga2"].address})
    for gid, gw in ((10, near["ga1"]), (11, near["ga2"])):
        a.add_peer(gid, gw.address)
    for gid, gw in ((20, far["gb1"]), (21, far["gb2"])):
        b.add_peer(gid, gw.address)
    a.set_route(2, [10, 11])
    b.set_route(1, [20, 21])
    return a, b, {**near, **far}


def stream(a, b, count, at, action, window=12):
    """Send ``count`` messages 1 -> 2 (``window`` in flight); call ``action`` after message
    ``at`` was posted. Return the receive buffers in arrival order and their tags."""
    bufs = [np.empty(SIZES[i % len(SIZES)], dtype=np.uint8) for i in range(count)]
    recvs = [b.irecv(buf, 1) for buf in bufs]
    sends, keep = [], []
    for i in range(count):
        data = message(i)
        keep.append(data)
        sends.append(a.isend(data, 2, tag=i))
        if i == at:
            action()
        if len(sends) - window >= 0:
            sends[-window].wait(scaled(60))
    for s in sends:
        s.wait(scaled(60))
    tags = [r.wait(scaled(60)).tag for r in recvs]
    return bufs, tags


def check(bufs, tags, b):
    assert tags == list(range(len(bufs))), "messages arrived out of order or twice"
    bad = [i for i, buf in enumerate(bufs) if not intact(i, buf)]
    assert not bad, f"messages {bad[:10]} arrived corrupted"


def kill_9(gw):
    os.kill(gw.pid, signal.SIGKILL)


@pytest.mark.parametrize("seed", range(8))
def test_one_tier_stream_survives_kill_9(open_engine, gateway, seed):
    rng = random.Random(seed)
    a, b, gws = build(open_engine, gateway, two_tier=False)
    victim = gws[rng.choice(sorted(gws))]
    count = 40
    bufs, tags = stream(a, b, count, rng.randrange(count - 5), lambda: kill_9(victim))
    check(bufs, tags, b)
    assert a.stats()["failovers"] + b.stats()["failovers"] >= 1, "no endpoint saw the loss"


def test_an_envelope_waiting_unmatched_when_its_gateway_dies_is_still_answered(open_engine,
                                                                              gateway):
    # A rendezvous envelope (RTS) that came through a gateway and waits unmatched at the
    # receiver stays when that gateway dies: the sequence layer took it, so the sender never
    # sends it again. Dropped with the connection, the receive posted after and the send
    # waited for each other for ever (coc-run's kill -9 failover test hung 1 run in 30).
    a, b, gws = build(open_engine, gateway, two_tier=False)
    data = message(3)
    assert data.size > 128 * 1024, "the message must go by rendezvous"
    send = a.isend(data, 2, tag=5)
    deadline = time.monotonic() + scaled(20)
    while b.iprobe(1, 5) is None:
        assert time.monotonic() < deadline, "the envelope never reached the receiver"
        time.sleep(0.005)
    carriers = [gw for gw in gws.values() if gw.stats()["frames_forwarded"] > 0]
    assert len(carriers) == 1, "one gateway carries the pair's envelopes"
    kill_9(carriers[0])
    while b.stats()["failovers"] < 1:
        assert time.monotonic() < deadline, "the receiver never saw the gateway die"
        time.sleep(0.005)
    got = np.empty_like(data)
    assert b.irecv(got, 1, tag=5).wait(scaled(30)).tag == 5
    send.wait(scaled(30))
    assert intact(3, got)


@pytest.mark.parametrize("seed", range(8))
def test_two_tier_stream_survives_kill_9(open_engine, gateway, seed):
    rng = random.Random(100 + seed)
    a, b, gws = build(open_engine, gateway, two_tier=True)
    victim = gws[rng.choice(sorted(gws))]
    count = 40
    bufs, tags = stream(a, b, count, rng.randrange(count - 5), lambda: kill_9(victim))
    check(bufs, tags, b)


def test_sigstopped_gateway_is_declared_dead_and_bypassed(open_engine, gateway):
    a, b, gws = build(open_engine, gateway, two_tier=False)
    stopped = []

    def stop_busiest():
        # stop the gateway that carried most, so the stream must notice
        gw = max(gws.values(), key=lambda g: g.stats()["frames_forwarded"])
        os.kill(gw.pid, signal.SIGSTOP)
        stopped.append(gw)

    try:
        bufs, tags = stream(a, b, 30, 10, stop_busiest)
    finally:
        for gw in stopped:
            os.kill(gw.pid, signal.SIGCONT)
    assert stopped
    check(bufs, tags, b)
    log = "\n".join(a.take_log() + b.take_log())
    # declared dead by silence: on an open connection (liveness), or on one that was still
    # in its handshake when the gateway stopped (a busy machine may be that slow to connect)
    assert "liveness timeout" in log or "handshake deadline passed" in log, log


def test_only_gateway_lost_fails_fast_naming_it(open_engine, gateway):
    a, b = open_engine(1), open_engine(2)
    gw = gateway(10, peers={1: a.address, 2: b.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    for eng, other in ((a, 2), (b, 1)):
        eng.add_peer(10, gw.address)
        eng.set_route(other, [10])
    a.isend(b"hello", 2).wait(scaled(10))
    b.irecv(bytearray(5), 1).wait(scaled(10))
    recv = b.irecv(bytearray(5), 1)
    kill_9(gw)
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        recv.wait(scaled(30))
    assert time.monotonic() - start < scaled(30)
    assert "PeerLost" in type(info.value).__name__, info.value
    assert any("endpoint 10" in line for line in b.take_log())


def test_both_gateways_closing_on_a_dying_sender_strand_nothing(open_engine, gateway, spawn):
    # Endpoint 3 (a child process) streams a large message to 2 over both gateways and is
    # killed mid-stream. Each gateway is then cutting a frame of it through to 2 and must
    # close its connection to 2 (the frame cannot be finished): 2 sees both of its gateways
    # go at once, yet both live. The stream 1 -> 2 across that moment loses nothing: the
    # second loss puts back the first gateway rather than stranding 2's routes.
    a, b = open_engine(1), open_engine(2)
    child = spawn(3, "die_mid_send", dest=2, size=256 << 20, after=scaled(60))
    ends = {1: a.address, 2: b.address, 3: child.address}
    gws = {gid: gateway(gid, peers=ends, routes={e: [[e, 1]] for e in ends}) for gid in (10, 11)}
    for eng, others in ((a, (2, 3)), (b, (1, 3))):
        for gid, gw in gws.items():
            eng.add_peer(gid, gw.address)
        for other in others:
            eng.set_route(other, [10, 11])
    whole = np.empty(256 << 20, dtype=np.uint8)
    big = b.irecv(whole, 3)
    child.connect({gid: gw.address for gid, gw in gws.items()}, {2: [10, 11]})
    deadline = time.monotonic() + scaled(30)
    while min(gw.stats()["bytes_forwarded"] for gw in gws.values()) < (8 << 20):
        assert time.monotonic() < deadline, "the large message never started"
        time.sleep(0.002)
    # it flows through both gateways: kill its sender while 1 -> 2 messages are in flight
    bufs, tags = stream(a, b, 30, 2, lambda: os.kill(child.proc.pid, signal.SIGKILL))
    check(bufs, tags, b)
    try:  # its sender died: the large message fails, naming it (unless it was all there)
        big.wait(scaled(30))
    except errors.PeerLost as exc:
        assert exc.peer == 3, exc
    else:
        assert (whole == 1).all()


@pytest.mark.parametrize("victim", ["ga1", "ga2"])
def test_a_frame_stalled_by_a_stopped_gateway_does_not_look_like_a_dead_one(
        open_engine, gateway, victim, monkeypatch):
    # Two tiers; a large message streams 1 -> {ga1, ga2} -> {gb1, gb2} -> 2 and one near
    # gateway is stopped (SIGSTOP) mid-fragment. The far gateways were cutting its
    # fragments through to 2, so their connections to 2 stop in the middle of a frame, with
    # no room for a PING. The far gateways judge the stopped one and close those
    # connections themselves (the rest goes again through the other near gateway);
    # endpoint 2 must leave them that verdict, or it closes its connections to live
    # gateways, which then tell endpoint 1 that 2 died. The endpoints' liveness timeout is
    # set shorter than the gateways' so that, judged at its plain timeout, 2 would always
    # come first. Sockets, not shared memory, as between hosts (a ring's doorbells keep
    # a connection talking).
    monkeypatch.setenv("COC_SHM", "0")
    monkeypatch.setenv("COC_LIVENESS_MS", "1000")

    def slower_gateway(*args, **kwargs):
        with monkeypatch.context() as m:
            m.setenv("COC_LIVENESS_MS", "1300")
            return gateway(*args, **kwargs)

    a, b, gws = build(open_engine, slower_gateway, two_tier=True)
    size = 96 << 20
    data = np.arange(size // 8, dtype=np.uint64).view(np.uint8)
    got = np.empty(size, dtype=np.uint8)
    recv, send = b.irecv(got, 1, tag=5), a.isend(data, 2, tag=5)
    far = (gws["gb1"], gws["gb2"])
    deadline = time.monotonic() + scaled(30)
    while min(gw.stats()["bytes_forwarded"] for gw in far) < (8 << 20):
        assert time.monotonic() < deadline, "the large message never started on both lanes"
        time.sleep(0.002)
    with sigstopped(gws[victim].pid):
        send.wait(scaled(60))
        recv.wait(scaled(60))
    assert (got == data).all(), "the message arrived corrupted"
    log = b.take_log()
    assert not [line for line in log if "presumed dead" in line], \
        "endpoint 2 judged a live far gateway dead:\n" + "\n".join(log)



def exchange_all(engines, size, tag):
    """Every endpoint sends ``size`` bytes to every other one; all complete (else raise)."""
    recvs = {(src.self_id, dst.self_id): dst.irecv(np.empty(size, dtype=np.uint8), src.self_id,
                                                   tag=tag)
             for dst in engines for src in engines if src is not dst}
    sends = [src.isend(np.full(size, src.self_id, dtype=np.uint8), dst.self_id, tag=tag)
             for src in engines for dst in engines if dst is not src]
    for s in sends:
        s.wait(scaled(60))
    for (src, _), r in recvs.items():
        assert r.wait(scaled(60)).source == src


def two_sites(open_engine, gateway):
    """Endpoints 1 and 2 on one site talk directly; endpoint 3 is reached over gateways 10
    and 11, which route for all three. Return ({id: engine}, {id: gateway daemon})."""
    engines = {i: open_engine(i) for i in (1, 2, 3)}
    ends = {i: e.address for i, e in engines.items()}
    gws = {gid: gateway(gid, peers=ends, routes={i: [[i, 1]] for i in ends}) for gid in (10, 11)}
    for i, eng in engines.items():
        for gid, gw in gws.items():
            eng.add_peer(gid, gw.address)
        for other in ends:
            if other != i:
                direct = {i, other} == {1, 2}
                if direct:
                    eng.add_peer(other, ends[other])
                eng.set_route(other, [other] if direct else [10, 11])
    return engines, gws


@pytest.mark.parametrize("shm", ["0", "1"])
def test_a_gateway_stopped_past_the_liveness_timeout_reports_no_live_endpoint_dead(
        open_engine, gateway, shm, monkeypatch):
    # Gateway 10 is stopped (SIGSTOP) past the endpoints' liveness timeout: they judge it
    # silent, close their connections to it and go on over gateway 11. When it resumes it
    # reads those closes, ends without BYE as when an endpoint dies. It must dial each
    # endpoint back, find it alive and report nobody lost: else endpoint 2 hears that
    # endpoint 1 is lost (their route is direct: no other gateway to try) and fails the
    # receive from 1 it posted across the stop.
    monkeypatch.setenv("COC_SHM", shm)
    engines, gws = two_sites(open_engine, gateway)
    big = 1 << 20       # rendezvous, striped over both gateways: 1, 2 and 3 dial both
    exchange_all(list(engines.values()), big, tag=1)
    assert all(gw.stats()["connections_open"] >= 3 for gw in gws.values())
    across = {(src, dst): engines[dst].irecv(np.empty(64, dtype=np.uint8), src, tag=2)
              for dst in engines for src in engines if src != dst}
    stopped = gws[10]
    with sigstopped(stopped.pid):
        # every endpoint judges it (liveness timeout) and moves its routes to gateway 11
        deadline = time.monotonic() + scaled(30)
        while sum(e.stats()["failovers"] for e in engines.values()) < len(engines):
            assert time.monotonic() < deadline, "the endpoints never judged the stopped gateway"
            time.sleep(0.05)
    logs = {i: [] for i in engines}

    def told():
        """Log lines where an endpoint heard from a gateway that another one is lost."""
        for i, e in engines.items():
            logs[i] += e.take_log()
        return [f"endpoint {i}: {line}" for i, log in logs.items() for line in log
                if "reported by a gateway" in line or "cannot reach endpoint" in line]

    # the resumed gateway reads the closes and dials every endpoint back
    deadline = time.monotonic() + scaled(30)
    while stopped.stats().get("peers_dialed_back", 0) < len(engines) and not told():
        assert time.monotonic() < deadline, "the resumed gateway dialed nobody back:\n" + \
            gateway_log(stopped)
        time.sleep(0.05)
    for src, dst in across:
        engines[src].isend(np.full(64, src, dtype=np.uint8), dst, tag=2)
    for (src, dst), r in across.items():
        try:
            assert r.wait(scaled(60)).source == src
        except Exception:
            told()
            raise AssertionError("\n".join(f"{i}: {l}" for i, log in logs.items() for l in log))
    exchange_all(list(engines.values()), big, tag=3)
    assert not told(), "a live endpoint was reported lost:\n" + "\n".join(told())
    # what the gateway sent on the connections it dialed was taken, though the endpoints
    # had put it out of their routes: the PATH frames for the pairs that crossed it
    assert any("reported through endpoint 10 " in line for log in logs.values() for line in log), \
        logs
    wait_for_log(stopped, "answers a new connection after its last one ended")


def test_a_killed_endpoint_is_reported_lost_when_its_dial_back_is_refused(
        idle_child_behind_gateway):
    # Its gateway dials endpoint 2 back before reporting it; a dead process refuses the dial
    # (nothing listens at its address), so the report comes at once, and endpoint 1's
    # receive from 2 fails naming it.
    me, child, gw = idle_child_behind_gateway
    req = me.irecv(bytearray(8), 2)
    child.proc.kill()
    with pytest.raises(errors.PeerLost, match="endpoint 2"):
        req.wait(scaled(30))
    # refused, or (killed as the dial began) reset before its handshake
    wait_for_log(gw, "cannot be dialed back", "does not answer a new connection")
    assert gw.stats()["peers_dialed_back"] == 0


def test_a_stopped_endpoint_is_reported_lost_when_its_dial_back_gets_no_answer(
        idle_child_behind_gateway):
    # Endpoint 2 is stopped (SIGSTOP): its gateway judges it silent (liveness timeout) and
    # dials it back. Its kernel accepts the connection, but nobody answers the handshake:
    # after the liveness bound, the gateway reports it lost after all, and endpoint 1's
    # receive from 2 fails naming it.
    me, child, gw = idle_child_behind_gateway
    req = me.irecv(bytearray(8), 2)
    with sigstopped(child.proc.pid):
        with pytest.raises(errors.PeerLost, match="endpoint 2"):
            req.wait(scaled(30))
    wait_for_log(gw, "does not answer a new connection")
    assert gw.stats()["peers_dialed_back"] == 0


def test_a_near_gateway_stopped_and_resumed_reports_nothing_across_two_tiers(
        open_engine, gateway, monkeypatch):
    # Two tiers, 1 -> {ga1, ga2} -> {gb1, gb2} -> 2. Gateway ga1 is stopped past the
    # liveness timeout: endpoint 1 and the far gateways judge it and route around it. When it
    # resumes, it dials endpoint 1 back, finds it alive and tells endpoint 2 to send again
    # (PATH, through a far gateway), not that 1 is lost: an ERROR would take a live far
    # gateway out of 2's routes, or fail 2's receives once it has no other.
    monkeypatch.setenv("COC_SHM", "0")
    a, b, gws = build(open_engine, gateway, two_tier=True)
    big = 1 << 20
    exchange_all([a, b], big, tag=1)
    across = b.irecv(np.empty(64, dtype=np.uint8), 1, tag=2)
    stopped = gws["ga1"]
    with sigstopped(stopped.pid):
        deadline = time.monotonic() + scaled(30)
        while a.stats()["failovers"] < 1:
            assert time.monotonic() < deadline, "endpoint 1 never judged the stopped gateway"
            time.sleep(0.05)
    log = []

    def told():
        log.extend(b.take_log() + a.take_log())
        return [line for line in log if "reported by a gateway" in line or "cannot reach" in line]

    deadline = time.monotonic() + scaled(30)
    while stopped.stats().get("peers_dialed_back", 0) < 1 and not told():
        assert time.monotonic() < deadline, "the resumed gateway dialed nobody back:\n" + \
            gateway_log(stopped)
        time.sleep(0.05)
    a.isend(np.full(64, 1, dtype=np.uint8), 2, tag=2)
    assert across.wait(scaled(60)).source == 1
    exchange_all([a, b], big, tag=3)
    assert not told(), "\n".join(log)


def test_an_endpoint_redialing_its_stopped_gateway_is_not_refused_as_a_twin(
        open_engine, gateway):
    # Endpoint 1 streams a large message to 2 through their only gateway, over TCP (as
    # between hosts: buffers of megabytes). The gateway is stopped mid-stream; 1 judges it
    # silent and closes its connection, with megabytes of it unread at the gateway, and the
    # stream fails (no other gateway). 1 dials the gateway again while it is stopped and it
    # resumes: it meets the new connection with the old one's bytes and end still unread
    # (it reads them slowly: their frames wait for a new connection to 2, which closed
    # its own). The new connection is endpoint 1 again, not a second process claiming
    # its id: accepted, and a sequence of messages sent on it arrives complete and in order.
    a, b = open_engine(1), open_engine(2)
    gw = gateway(10, peers={1: _tcp(a.address), 2: _tcp(b.address)},
                 routes={1: [[1, 1]], 2: [[2, 1]]})
    for eng, other in ((a, 2), (b, 1)):
        eng.add_peer(10, _tcp(gw.address))
        eng.set_route(other, [10])
    size = 64 << 20
    recv = b.irecv(np.empty(size, dtype=np.uint8), 1, tag=5)
    send = a.isend(np.ones(size, dtype=np.uint8), 2, tag=5)
    deadline = time.monotonic() + scaled(30)
    while gw.stats()["bytes_forwarded"] < (4 << 20):
        assert time.monotonic() < deadline, "the large message never started"
        time.sleep(0.002)
    with sigstopped(gw.pid):
        for req in (send, recv):   # the verdict on the silent gateway fails them
            with pytest.raises(errors.PeerLost):
                req.wait(scaled(30))
        a.connect(10)               # its kernel accepts; the handshake waits for it
    count = 20
    bufs = [np.empty(SIZES[i % len(SIZES)], dtype=np.uint8) for i in range(count)]
    recvs = [b.irecv(buf, 1, tag=6) for buf in bufs]     # one tag: matched in send order
    sends = [a.isend(message(i), 2, tag=6) for i in range(count)]
    for s in sends:
        s.wait(scaled(60))
    for r in recvs:
        r.wait(scaled(60))
    bad = [i for i, buf in enumerate(bufs) if not intact(i, buf)]
    assert not bad, f"messages {bad} arrived out of order or corrupted"
    assert gw.stats()["duplicate_ids"] == 0, gateway_log(gw)



def test_an_endpoint_redialing_a_gateway_that_stopped_reading_it_is_not_refused_as_a_twin(
        open_engine, gateway, spawn, monkeypatch):
    # Endpoint 1 streams a large message over TCP through gateway 10 to endpoint 2, a child
    # that is stopped (SIGSTOP) mid-stream: the gateway's window towards 2 fills and it stops
    # reading 1, whose socket buffers then fill too. 1 hears nothing from the gateway, judges
    # it silent and closes its connection: its FIN waits behind the bytes it could not send,
    # so the gateway cannot see that connection end. 1 dials the gateway again. The new
    # connection comes from the same process (the incarnation in its hello): accepted, the
    # old one dropped, and 1 talks to endpoint 3 through the gateway on it. Before the
    # incarnation, the gateway refused it as a second process claiming endpoint 1.
    a = open_engine(1)                                 # judges its gateway after 1.5 s
    monkeypatch.setenv("COC_LIVENESS_MS", "600000")    # nobody else judges anybody
    c = open_engine(3)
    deaf = spawn(2, "recv_stream", source=1, sizes=[64 << 20])
    gw = gateway(10, peers={1: _tcp(a.address), 2: _tcp(deaf.address), 3: _tcp(c.address)},
                 routes={1: [[1, 1]], 2: [[2, 1]], 3: [[3, 1]]},
                 options={"forward_window": 1 << 20})
    deaf.connect({10: _tcp(gw.address)}, {1: [10]})
    for eng, others in ((a, (2, 3)), (c, (1,))):
        eng.add_peer(10, _tcp(gw.address))
        for other in others:
            eng.set_route(other, [10])
    assert deaf.recv() == "posted"
    send = a.isend(np.ones(64 << 20, dtype=np.uint8), 2)
    deadline = time.monotonic() + scaled(30)
    while gw.stats()["bytes_forwarded"] < (4 << 20):
        assert time.monotonic() < deadline, "the large message never started"
        time.sleep(0.002)
    os.kill(deaf.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(errors.PeerLost):           # 1's verdict on the silent gateway
            send.wait(scaled(30))
        a.connect(10)
        out = bytearray(5)
        recv = c.irecv(out, 1, tag=7)
        a.isend(b"again", 3, tag=7).wait(scaled(30))
        assert recv.wait(scaled(30)).count == 5 and out == b"again"
        assert gw.stats()["duplicate_ids"] == 0, gateway_log(gw)
        wait_for_log(gw, "replaced by its endpoint's new connection")
        # the dial back of 1 after its old connection ended finds the new one and dials
        # nothing: one connection each to 1, 2 and 3
        wait_for_log(gw, "endpoint 1 answers a new connection")
        assert gw.stats()["connections_open"] == 3, gateway_log(gw)
    finally:
        os.kill(deaf.proc.pid, signal.SIGKILL)
