"""A small service on rank 0 answering the other ranks with asyncio, no threads.

Rank 0 runs an event loop that answers "square this" requests from every other rank while a
second task keeps ticking; the other ranks ``await`` their answers the same way. Run:
``coc-run -n 4 examples/asyncio_service.py``.
"""

import asyncio

import coc

comm = coc.init()
REQUEST, ANSWER = 1, 2


async def serve(expected):
    """Answer ``expected`` requests from any rank, in arrival order."""
    for _ in range(expected):
        status = coc.Status()
        number = await comm.arecv(source=coc.ANY_SOURCE, tag=REQUEST, status=status)
        await comm.asend(number * number, status.source, tag=ANSWER)


async def tick(stop):
    ticks = 0
    while not stop.is_set():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


async def main():
    if comm.rank == 0:
        stop = asyncio.Event()
        ticker = asyncio.create_task(tick(stop))
        await serve(3 * (comm.size - 1))
        stop.set()
        print(f"rank 0 answered {3 * (comm.size - 1)} requests; the loop ticked "
              f"{await ticker} times meanwhile", flush=True)
    else:
        answers = []
        for k in range(3):
            await comm.asend(comm.rank * 10 + k, 0, tag=REQUEST)
            answers.append(await comm.arecv(source=0, tag=ANSWER))
        assert answers == [(comm.rank * 10 + k) ** 2 for k in range(3)]
        print(f"rank {comm.rank} on site {comm.site} got {answers}", flush=True)


asyncio.run(main())
