"""Routes by size class and striping: envelopes take the small route, rendezvous bytes the
large one, spread over its hops by weight; MPI's order holds across both (real processes,
real gateway daemons, gateway counters as the witness)."""

import hashlib
import time

import numpy as np
import pytest

import engine_peers

TIMEOUT = 30.0
EAGER = 8 << 10          # small limits: many fragments per message, many messages per test
FRAGMENT = 8 << 10
KW = {"eager_limit": EAGER, "fragment_size": FRAGMENT}


def _frames(size):
    return -(-size // FRAGMENT)


def _direct_small_gateway_large(open_engine, spawn, gateway, scenario, **args):
    """Endpoint 1 here, 2 in a child; small class direct, large class through gateway 10."""
    me = open_engine(1, **KW)
    child = spawn(2, scenario, engine_kwargs=KW, **args)
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.add_peer(2, child.address)
    me.set_route(2, [2], size_class="small")
    me.set_route(2, [10], size_class="large")
    child.connect({1: me.address, 10: gw.address},
                  {1: {"small": [[1, 1]], "large": [[10, 1]]}})
    return me, child, gw


def test_small_messages_bypass_the_gateway_large_bytes_cross_it(open_engine, spawn, gateway):
    small = [0, 1, 100, EAGER - 1, EAGER]
    large = [EAGER + 1, 5 * FRAGMENT, 5 * FRAGMENT + 3, 1 << 20]
    me, child, gw = _direct_small_gateway_large(open_engine, spawn, gateway, "echo", peer=1,
                                                count=len(small) + len(large))
    for i, size in enumerate(small):
        data = engine_peers.payload(i, size)
        out = np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, 2, tag=i)
        me.isend(data, 2, tag=i).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size and (out == data).all()
    assert gw.stats()["frames_forwarded"] == 0, "a small message crossed the gateway"
    for i, size in enumerate(large, len(small)):
        data = engine_peers.payload(i, size)
        out = np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, 2, tag=i)
        me.isend(data, 2, tag=i).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size and (out == data).all()
    assert child.result() == len(small) + len(large)
    stats = gw.stats()
    # there and back: exactly the DATA frames, no envelope (RTS, CTS)
    assert stats["bytes_forwarded"] == 2 * sum(large)
    assert stats["frames_forwarded"] == 2 * sum(_frames(n) for n in large)


def _mixed_sizes(count):
    """Sizes around the eager limit and across several fragments, in a scrambled order."""
    edge = [EAGER - 1, EAGER, EAGER + 1, 0, 1, 3 * FRAGMENT + 1]
    return [edge[i % len(edge)] if i % 3 else (i * 7919) % (6 * FRAGMENT) + 1
            for i in range(count)]


def _receive_in_order(me, source, sizes, contexts):
    """Receive every message of each context in turn, alternating a named tag and ANY_TAG;
    check each is the next one that context sent, intact."""
    buf = np.empty(max(sizes) + 1, dtype=np.uint8)
    for ctx in range(contexts):
        for k, i in enumerate(range(ctx, len(sizes), contexts)):
            tag = i % 1000 if k % 2 else engine_peers.engine.ANY_TAG
            st = me.irecv(buf, source, tag=tag, context=ctx).wait(TIMEOUT)
            assert (st.count, st.tag) == (sizes[i], i % 1000), (ctx, i)
            if sizes[i] >= 8:
                assert engine_peers.seq_of(buf) == i, (ctx, k)
            if sizes[i] > 8:
                assert (buf[8:sizes[i]] == i % 251).all(), f"message {i} garbled"


def test_order_holds_across_size_classes(open_engine, spawn, gateway):
    sizes, contexts = _mixed_sizes(1200), 3
    me, child, gw = _direct_small_gateway_large(open_engine, spawn, gateway, "send_stream",
                                                dest=1, sizes=sizes, contexts=contexts)
    _receive_in_order(me, 2, sizes, contexts)
    assert child.result() == len(sizes)
    # the large messages' bytes cross the gateway; so do those of eager-sized messages sent
    # after the receiver's credit ran out (they go by rendezvous: credits, wire-protocol.md)
    large = sum(n for n in sizes if n > EAGER)
    assert large <= gw.stats()["bytes_forwarded"] <= sum(sizes)


def _two_gateways(open_engine, spawn, gateway, scenario, weights=(2, 1), engine_kwargs=KW,
                  **args):
    """Endpoint 1 here, 2 in a child, both attached to gateways 10 and 11 (as on
    two-gateways.yaml): envelopes through 10, bytes striped over 10 and 11 by weights."""
    me = open_engine(1, **engine_kwargs)
    child = spawn(2, scenario, engine_kwargs=engine_kwargs, **args)
    ends = {1: me.address, 2: child.address}
    gws = [gateway(g, peers=ends, routes={e: [[e, 1]] for e in ends}) for g in (10, 11)]
    route = {"small": [[10, 1]], "large": [[10, weights[0]], [11, weights[1]]]}
    for g, gw in zip((10, 11), gws):
        me.add_peer(g, gw.address)
    me.set_route(2, [10], size_class="small")
    me.set_route(2, [10, 11], list(weights), size_class="large")
    child.connect({10: gws[0].address, 11: gws[1].address}, {1: route})
    return me, child, gws


def test_one_pair_stripes_its_bytes_over_both_gateways_in_the_weights_ratio(
        open_engine, spawn, gateway):
    size, fragment = 64 << 20, 256 << 10
    kw = {"eager_limit": 64 << 10, "fragment_size": fragment}
    me, child, gws = _two_gateways(open_engine, spawn, gateway, "recv_digest", source=1,
                                   sizes=[size], engine_kwargs=kw)
    data = engine_peers.random_bytes(size, seed=11)
    me.isend(data, 2).wait(TIMEOUT)
    assert child.result() == [(hashlib.sha256(data).hexdigest(), size)]
    carried = [gw.stats()["bytes_forwarded"] for gw in gws]
    assert sum(carried) == size
    # 2:1 by bytes, to within a fragment
    assert abs(carried[0] - 2 * carried[1]) <= 2 * fragment, carried


def test_a_gateway_stripes_over_two_next_gateways(open_engine, spawn, gateway):
    # 1 -> gateway 10 -> {11 (weight 3), 12 (weight 1)} -> 2: the striping is the gateway's
    sizes = [1 << 20, 3 * FRAGMENT + 5, 2 << 20]
    me = open_engine(1, **KW)
    child = spawn(2, "recv_digest", source=1, sizes=sizes, engine_kwargs=KW)
    g10 = gateway(10, peers={1: me.address}, routes={1: [[1, 1]]})
    far = [gateway(g, peers={2: child.address, 10: g10.address},
                   routes={2: [[2, 1]], 1: [[10, 1]]}) for g in (11, 12)]
    g10.update(peers={11: far[0].address, 12: far[1].address},
               routes={2: {"small": [[11, 1]], "large": [[11, 3], [12, 1]]}})
    me.add_peer(10, g10.address)
    me.set_route(2, [10])
    child.connect({11: far[0].address, 12: far[1].address},
                  {1: {"small": [[11, 1]], "large": [[11, 3], [12, 1]]}})
    datas = [engine_peers.random_bytes(n, seed=n) for n in sizes]
    for data in datas:
        me.isend(data, 2).wait(TIMEOUT)
    assert child.result() == [(hashlib.sha256(d).hexdigest(), d.size) for d in datas]
    carried = [gw.stats()["bytes_forwarded"] for gw in far]
    assert g10.stats()["bytes_forwarded"] == sum(carried) == sum(sizes)
    assert abs(carried[0] - 3 * carried[1]) <= 4 * FRAGMENT, carried


def test_order_holds_across_size_classes_and_stripes(open_engine, spawn, gateway):
    sizes, contexts = _mixed_sizes(1200), 3
    me, child, gws = _two_gateways(open_engine, spawn, gateway, "send_stream", dest=1,
                                   sizes=sizes, contexts=contexts)
    _receive_in_order(me, 2, sizes, contexts)
    assert child.result() == len(sizes)
    carried = [gw.stats()["bytes_forwarded"] for gw in gws]
    large = sum(n for n in sizes if n > EAGER)
    assert sum(carried) == sum(sizes)  # envelopes and eager messages all through 10
    # 11 carries a third of the rendezvous bytes: the large messages' and those of
    # eager-sized messages sent after the receiver's credit ran out
    assert large - 3 * FRAGMENT <= 3 * carried[1] <= sum(sizes) + 3 * FRAGMENT, (carried, large)


def test_a_stripe_gateway_lost_mid_transfer_is_resent_through_the_other(open_engine, spawn,
                                                                        gateway):
    # The sender holds its frames to gateway 11 (user-space delay), so the transfer is
    # surely under way, half delivered through 10, when 11 is stopped: the bytes it held
    # go again through 10 (failover, docs/wire-protocol.md), each counted once.
    size = 4 << 20
    me, child, gws = _two_gateways(open_engine, spawn, gateway, "recv_digest", source=1,
                                   sizes=[size], weights=(1, 1), connect=[10, 11])
    me.set_peer_delay(11, 20.0)  # far beyond the wait below, far below the timeout
    data = engine_peers.random_bytes(size, seed=5)
    send = me.isend(data, 2)
    deadline = time.monotonic() + TIMEOUT
    while gws[0].stats()["bytes_forwarded"] < size // 2:  # 10's half went through
        assert time.monotonic() < deadline, "the transfer never started"
        time.sleep(0.01)
    gws[1].kill()
    send.wait(TIMEOUT)
    assert child.result() == [(hashlib.sha256(data).hexdigest(), size)]


def test_a_stripe_gateway_lost_before_the_transfer_is_routed_around(open_engine, spawn,
                                                                     gateway):
    # 11 is gone before the rendezvous: its lane moves to 10 and the bytes all arrive
    size = 1 << 20
    me, child, gws = _two_gateways(open_engine, spawn, gateway, "recv_digest", source=1,
                                   sizes=[size], weights=(1, 1))
    gws[1].kill()
    data = engine_peers.random_bytes(size, seed=6)
    me.isend(data, 2).wait(TIMEOUT)
    assert child.result() == [(hashlib.sha256(data).hexdigest(), size)]
