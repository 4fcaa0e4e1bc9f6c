"""Forwarding through gateway daemons (``python -m coc.gateway``) between real processes."""

import time

import numpy as np
import pytest

import engine_peers
from coc import errors
from engine_peers import gateway_log, round_trips, sigstopped
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
EAGER = 64 << 10
SIZES = [0, 10, EAGER, EAGER + 1, 3 << 20]  # eager and rendezvous


def test_one_gateway_is_the_only_path(open_engine, spawn, gateway):
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "echo", peer=1, count=len(SIZES), engine_kwargs={"eager_limit": EAGER})
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.add_peer(2, child.address)  # known, yet the route says: through the gateway
    me.set_route(2, [10])
    child.connect({10: gw.address}, {1: [10]})
    round_trips(me, 2, SIZES)
    assert child.result() == len(SIZES)
    stats = gw.stats()
    assert stats["frames_forwarded"] >= 2 * len(SIZES)
    assert stats["bytes_forwarded"] >= 2 * sum(SIZES)
    assert me.stats()["connections_open"] == 1, "the sender connected around the gateway"
    with pytest.raises(errors.NoRouteError):
        me.isend(b"x", 3).wait(TIMEOUT)


def test_two_gateways_in_a_row(open_engine, spawn, gateway):
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "echo", peer=1, count=len(SIZES), engine_kwargs={"eager_limit": EAGER})
    g1 = gateway(10, peers={1: me.address}, routes={1: [[1, 1]]})
    g2 = gateway(11, peers={2: child.address}, routes={2: [[2, 1]]})
    g1.update(peers={11: g2.address}, routes={2: [[11, 1]]})
    g2.update(peers={10: g1.address}, routes={1: [[10, 1]]})
    me.add_peer(10, g1.address)
    me.set_route(2, [10])
    child.connect({11: g2.address}, {1: [11]})
    round_trips(me, 2, SIZES)
    assert child.result() == len(SIZES)
    for gw in (g1, g2):
        assert gw.stats()["frames_forwarded"] >= 2 * len(SIZES)
    final = g1.stop()
    assert final["reason"] == "eof" and final["stats"]["frames_forwarded"] >= 2 * len(SIZES)


def test_two_gateways_share_load_in_order(open_engine, spawn, gateway):
    # The engine keeps a (source, destination) pair on one hop, so order holds, and
    # spreads pairs over the hops: streams 2->1 and 3->1 take different gateways.
    contexts, senders = 4, (2, 3)
    sizes = [(i * 7919) % (2 * EAGER) + 8 for i in range(1000)]
    me = open_engine(1, eager_limit=EAGER)
    kids = [spawn(k, "send_stream", dest=1, sizes=sizes, contexts=contexts,
                  engine_kwargs={"eager_limit": EAGER}) for k in senders]
    ends = {1: me.address, **{k.id: k.address for k in kids}}
    gws = [gateway(g, peers=ends, routes={e: [[e, 1]] for e in ends}) for g in (10, 11)]
    for gw, g in zip(gws, (10, 11)):
        me.add_peer(g, gw.address)
    for kid in kids:
        me.set_route(kid.id, [10, 11], [1, 1])
        kid.connect({10: gws[0].address, 11: gws[1].address}, {1: ([10, 11], [1, 1])})
    buf = np.empty(max(sizes), dtype=np.uint8)
    for source in senders:
        for ctx in range(contexts):  # one stream after the other: order per stream
            got = []
            for _ in range(ctx, len(sizes), contexts):
                st = me.irecv(buf, source, context=ctx).wait(TIMEOUT)
                got.append(engine_peers.seq_of(buf))
                assert st.count == sizes[got[-1]]
            assert got == list(range(ctx, len(sizes), contexts)), (source, ctx)
    assert [k.result() for k in kids] == [len(sizes)] * 2
    shares = [gw.stats()["frames_forwarded"] for gw in gws]
    assert min(shares) > 0.2 * sum(shares), f"load not shared: {shares}"


def test_gateway_memory_stays_bounded_when_receiver_stops_reading(open_engine, spawn, gateway):
    msg, count, bound = 32 << 10, 6400, 64 << 20  # 200 MiB of eager messages
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "recv_stream", source=1, sizes=[msg] * count,
                  engine_kwargs={"eager_limit": EAGER})
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    child.connect({10: gw.address}, {1: [10]})
    assert child.recv() == "posted"
    baseline = engine_peers.rss_bytes(gw.pid)
    with sigstopped(child.proc.pid):
        sends = [me.isend(engine_peers.payload(i, msg), 2) for i in range(count)]
        time.sleep(3)
        stalled = gw.stats()
        grown = engine_peers.rss_bytes(gw.pid) - baseline
        done = sum(r.done for r in sends)
    print(f"stalled: {stalled}, rss grown {grown}, sends done {done}")
    assert grown < bound, f"gateway grew by {grown >> 20} MiB while the receiver slept"
    assert stalled["forward_bytes_buffered"] < bound
    assert stalled["bytes_forwarded"] < msg * count // 2, "the stall never reached the gateway"
    for r in sends:
        r.wait(120)
    seqs, intact = child.result(timeout=scaled(120))
    assert seqs == list(range(count)) and intact
    assert gw.stats()["forward_bytes_buffered_max"] < bound


def test_stranger_is_rejected_by_the_gateway(open_engine, spawn, gateway):
    me = open_engine(1)
    gw = gateway(10, peers={1: me.address}, routes={1: [[1, 1]]})
    stranger = spawn(2, "try_sends", dest=1, sizes=[100, 1 << 20], secret=b"z" * 32)
    gw.update(peers={2: stranger.address}, routes={2: [[2, 1]]})
    req = me.irecv(bytearray(1 << 20))
    stranger.connect({10: gw.address}, {1: [10]})
    # Eager and rendezvous alike: the stranger learns that nothing got through.
    assert None not in stranger.result(), "a send with the wrong secret reported success"
    with pytest.raises(errors.CocTimeoutError):
        req.wait(1.0)
    stats = gw.stop()["stats"]
    assert stats["auth_failures"] >= 1 and stats["frames_forwarded"] == 0
    assert "auth" in gateway_log(gw).lower(), "the engine's log line did not reach stderr"
    req.cancel()


def test_gateway_dying_mid_message_raises_peer_lost(open_engine, spawn, gateway):
    size = 512 << 20
    me = open_engine(1)
    child = spawn(2, "send_tagged", dest=1, items=[(0, b"s" * size)])
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    buf = np.empty(size, dtype=np.uint8)
    req = me.irecv(buf, 2)
    child.connect({10: gw.address}, {1: [10]})
    deadline = time.monotonic() + TIMEOUT
    while gw.stats()["bytes_forwarded"] < 1 << 20:  # the payload is on its way
        assert time.monotonic() < deadline, "nothing was forwarded"
        time.sleep(0.005)
    gw.proc.kill()
    with pytest.raises(errors.PeerLost):
        req.wait(TIMEOUT)
    with pytest.raises(AssertionError, match="PeerLost"):
        child.result()  # the sender learns it too


def test_gateway_reuses_its_forwarding_buffers(open_engine, spawn, gateway):
    # Fresh memory per forwarded frame costs a page fault per 4 KiB (and halved the
    # gateway's bandwidth when measured): 400 MiB through the gateway must not touch
    # anywhere near 100k fresh pages.
    size, count = 4 << 20, 100
    me = open_engine(1)
    child = spawn(2, "send_repeated", dest=1, size=size, count=count)
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    child.connect({10: gw.address}, {1: [10]})
    buf = np.empty(size, dtype=np.uint8)
    me.irecv(buf, 2).wait(TIMEOUT)  # the first message sets everything up
    before = engine_peers.minor_faults(gw.pid)
    for _ in range(count - 1):
        me.irecv(buf, 2).wait(TIMEOUT)
    faults = engine_peers.minor_faults(gw.pid) - before
    assert child.result() == count
    assert faults < (size * count // 4096) // 10, f"{faults} page faults for {count} messages"


def test_gateway_forwards_frames_around_its_inline_size(open_engine, spawn, gateway):
    # A forwarded frame of up to 448 bytes (header included) travels in its item, a larger
    # one in a pooled buffer (forward.c): both sides of that line, and the largest eager
    # frame, arrive intact, the buffers recycled in between.
    sizes = [383, 384, 385, 4032, 4033, 10, 384, EAGER, 385, 0] * 3
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "echo", peer=1, count=len(sizes), engine_kwargs={"eager_limit": EAGER})
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    child.connect({10: gw.address}, {1: [10]})
    round_trips(me, 2, sizes)
    assert child.result() == len(sizes)
    assert gw.stats()["frames_forwarded"] >= 2 * len(sizes)


def test_gateway_follows_a_route_change_at_once(open_engine, spawn, gateway):
    # A gateway remembers the next hop of the last (source, destination) pair it forwarded
    # (forward.c); a route set afterwards must move that pair's very next frame: the
    # frames of 1 -> 2 cross g2 until g1's route says g3, then g3 only.
    first, then = 20, 20
    me = open_engine(1)
    child = spawn(2, "echo", peer=1, count=first + then)
    g2 = gateway(11, peers={2: child.address}, routes={2: [[2, 1]]})
    g3 = gateway(12, peers={2: child.address}, routes={2: [[2, 1]]})
    g1 = gateway(10, peers={1: me.address, 11: g2.address, 12: g3.address},
                 routes={1: [[1, 1]], 2: [[11, 1]]})
    me.add_peer(10, g1.address)
    me.set_route(2, [10])
    child.connect({10: g1.address}, {1: [10]})  # the echoes come back through g1 directly
    round_trips(me, 2, [8] * first)
    before = [gw.stats()["frames_forwarded"] for gw in (g2, g3)]
    assert before[0] >= first and before[1] == 0, before
    g1.update(routes={2: [[12, 1]]})
    round_trips(me, 2, [8] * then)
    after = [gw.stats()["frames_forwarded"] for gw in (g2, g3)]
    assert child.result() == first + then
    assert after[0] == before[0], f"frames still crossed the old hop: {before} -> {after}"
    assert after[1] >= then, after


def test_connect_needs_a_route(open_engine):
    me = open_engine(1)
    with pytest.raises(errors.NoRouteError):
        me.connect(10)


def test_gateway_reports_an_endpoint_that_dies_silently(idle_child_behind_gateway):
    # Endpoint 2 never sends a byte; connected to its gateway at start, its death is still
    # noticed there and reported to endpoint 1, whose receive from 2 fails instead of hanging.
    me, child, _ = idle_child_behind_gateway
    req = me.irecv(bytearray(8), 2)
    child.proc.kill()
    with pytest.raises(errors.PeerLost, match="endpoint 2"):
        req.wait(TIMEOUT)
