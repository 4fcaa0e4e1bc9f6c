"""Routes by size class and striping: envelopes take the small route, rendezvous bytes the
large one, spread over its hops by weight; MPI's order holds across both (real processes,
real gateway daemons, gateway counters as the witness)."""

import numpy as np
import pytest

import engine_peers
from coc import errors

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
    large = [n for n in sizes if n > EAGER]
    assert gw.stats()["bytes_forwarded"] == sum(large)
