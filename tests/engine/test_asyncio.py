"""asyncio meets the engine through its pollable fd: loop.add_reader, drain, test."""

import asyncio

import numpy as np
from hang_bounds import scaled

TIMEOUT = scaled(30.0)


async def _completed(loop, eng, req):
    """Await ``req`` the way an asyncio layer does: wake on the engine fd, drain, test."""
    done = loop.create_future()

    def on_readable():
        eng.drain()
        if not done.done() and req.done:
            done.set_result(req.test())

    loop.add_reader(eng.fileno(), on_readable)
    try:
        on_readable()  # it may have completed before the reader was added
        return await asyncio.wait_for(done, TIMEOUT)
    finally:
        loop.remove_reader(eng.fileno())


def test_await_a_receive_through_add_reader(open_engine, spawn):
    me = open_engine(1)
    child = spawn(2, "send_tagged", dest=1, items=[(4, b"a" * 100), (5, b"b" * (2 << 20))])
    me.add_peer(2, child.address)
    me.set_route(2, [2])

    async def main():
        loop = asyncio.get_running_loop()
        small, large = bytearray(100), np.zeros(2 << 20, dtype=np.uint8)
        r_small, r_large = me.irecv(small, 2, 4), me.irecv(large, 2, 5)
        child.connect({1: me.address}, {1: [1]})
        st = await _completed(loop, me, r_small)
        st2 = await _completed(loop, me, r_large)
        return st, st2, small, large

    st, st2, small, large = asyncio.run(main())
    assert (st.source, st.tag, st.count) == (2, 4, 100) and small == b"a" * 100
    assert st2.count == 2 << 20 and (large == ord("b")).all()
    assert child.result() == 2
