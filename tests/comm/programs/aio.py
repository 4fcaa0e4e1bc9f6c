"""asyncio checks: awaitable requests, arecv/asend, the event loop keeps running while waiting."""

import asyncio

import numpy as np
from checks import Checks

import coc
from coc.comm import aio

comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
ok = Checks(comm)


async def ticker(stop):
    ticks = 0
    while not stop.is_set():
        await asyncio.sleep(0.005)
        ticks += 1
    return ticks


async def main():
    stop = asyncio.Event()
    ticks = asyncio.create_task(ticker(stop))
    # The receive is posted first; the matching send comes 0.2 s later: the loop ticks meanwhile.
    recv = asyncio.create_task(comm.arecv(source=left, tag=1))
    await asyncio.sleep(0.2)
    await comm.asend({"from": rank, "a": np.arange(100_000)}, right, tag=1)
    got = await recv
    ok.equal("arecv", got["from"], left)
    ok.equal("arecv array", got["a"], np.arange(100_000))
    # Several requests awaited at once, completed out of order.
    reqs = [comm.irecv(source=left, tag=10 + i) for i in range(4)]
    for i in reversed(range(4)):
        comm.isend(i * 2, right, tag=10 + i)
    ok.equal("aio.gather", await aio.gather(*reqs), [0, 2, 4, 6])
    buf = np.zeros(1000)
    st = coc.Status()
    recv = asyncio.ensure_future(comm.aRecv(buf, left, 20, st))
    await comm.aSend(np.full(1000, float(rank)), right, 20)
    await recv
    ok.equal("aRecv", (buf[0], st.source, st.tag), (float(left), left, 20))
    ok.equal("await request", await comm.Isend(b"x", rank, 30), None)
    comm.Recv(bytearray(1), rank, 30)
    stop.set()
    ok.true("loop kept running", await ticks >= 20)


asyncio.run(main())
comm.barrier()
ok.report()
