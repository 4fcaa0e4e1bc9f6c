"""asyncio without threads: requests awaited through the engine's pollable fd.

The engine makes an fd readable whenever one of its requests completes. One watcher per
event loop and engine listens with ``loop.add_reader``, drains the fd and advances the
requests awaited on that loop; a request done advances its future. ``await request``,
``await comm.arecv()`` and ``await comm.asend(obj, dest)`` all go through :func:`wait`.
The site's MPI has no pollable fd: when it is in use, the watcher also checks every
:data:`POLL_INTERVAL` seconds while requests are awaited.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coc.comm.port import Port
    from coc.comm.request import Request, Status

__all__ = ["wait", "gather"]

_watchers: dict[tuple[asyncio.AbstractEventLoop, int], _Watcher] = {}

#: Seconds between checks of requests that may complete through the site's MPI (no fd).
POLL_INTERVAL = 0.0005


class _Watcher:
    """Waits on one engine's fd in one event loop for the requests awaited there."""

    def __init__(self, loop: asyncio.AbstractEventLoop, port: Port) -> None:
        self.loop, self.port, self.fd = loop, port, port.fileno()
        self.waiting: list[tuple[Request, asyncio.Future[Any], Status | None]] = []
        self.poll = port.polls
        self.timer: asyncio.TimerHandle | None = None
        loop.add_reader(self.fd, self.readable)

    def readable(self) -> None:
        self.port.drain()
        self.check()

    def check(self) -> None:
        """Advance every awaited request; settle the futures of finished ones."""
        still = []
        for request, future, status in self.waiting:
            if future.done():
                continue
            if not request._progress():
                still.append((request, future, status))
                continue
            try:
                future.set_result(request.wait(status))
            except Exception as exc:  # noqa: BLE001 - delivered to the awaiting task
                future.set_exception(exc)
        self.waiting = still
        if not still:
            self.loop.remove_reader(self.fd)
            del _watchers[(self.loop, id(self.port))]
        elif self.poll and self.timer is None:  # the site's MPI has no fd: poll it
            self.timer = self.loop.call_later(POLL_INTERVAL, self.tick)

    def tick(self) -> None:
        self.timer = None
        self.check()


async def wait(request: Request, status: Status | None = None) -> Any:
    """Return the result of ``request`` (as ``request.wait(status)``) without blocking the loop."""
    if request._progress():
        return request.wait(status)
    loop = asyncio.get_running_loop()
    assert request._comm is not None   # a request of a communicator: the engine's fd
    port = request._comm._world.port
    watcher = _watchers.get((loop, id(port)))
    if watcher is None:
        watcher = _watchers[(loop, id(port))] = _Watcher(loop, port)
    future = loop.create_future()
    watcher.waiting.append((request, future, status))
    watcher.check()                 # it may have completed before the reader was added
    return await future


async def gather(*requests: Request) -> list[Any]:
    """Return the results of all ``requests`` once every one is complete."""
    return list(await asyncio.gather(*(wait(r) for r in requests)))
