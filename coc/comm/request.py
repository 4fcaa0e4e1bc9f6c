"""Requests and statuses as mpi4py has them, driven by small generators over engine requests.

An operation that needs several engine messages (an object with out-of-band buffers, a
collective of several rounds) is written as a generator: it yields the list of engine
requests it waits for, receives their statuses back, and finally returns its value.
:class:`Request` drives such a generator without blocking (:meth:`Request.test`) or
blocking (:meth:`Request.wait`); :func:`run` drives one to completion at once.
"""

from __future__ import annotations

import select
from abc import ABCMeta
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol, TypeVar

from coc.errors import CocTimeoutError, PeerExited, PeerLost, TruncationError

if TYPE_CHECKING:
    from coc.comm.communicator import Communicator

__all__ = ["Status", "Request", "Single", "run", "waitall", "waitany", "testall", "testany",
           "Part", "Envelope", "Steps"]

_T = TypeVar("_T")


class Envelope(Protocol):
    """What a completed part tells: source endpoint, tag and size in bytes."""

    @property
    def source(self) -> int: ...
    @property
    def tag(self) -> int: ...
    @property
    def count(self) -> int: ...


class Part(Protocol):
    """One message in flight: an engine request, or the site MPI's shaped like one."""

    def test(self) -> Envelope | None: ...
    def wait(self, timeout: float | None = None) -> Envelope: ...
    def message(self) -> Any: ...   # a receive without a buffer: the bytes (else None)


#: An operation of several messages: a generator that yields the parts it waits for, is
#: sent their envelopes back (in the same order) and returns its value.
Steps = Generator[list[Part], list[Envelope], _T]


class Status:
    """Source, tag and size of a received message (``Get_source``, ``Get_tag``, ``Get_count``)."""

    __slots__ = ("source", "tag", "count", "error", "cancelled")

    def __init__(self, source: int = -1, tag: int = -1, count: int = 0) -> None:
        self.source, self.tag, self.count = source, tag, count
        self.error, self.cancelled = 0, False

    def Get_source(self) -> int:
        """Return the rank that sent the message."""
        return self.source

    def Get_tag(self) -> int:
        """Return the message's tag."""
        return self.tag

    def Get_count(self, datatype: Any = None) -> int:
        """Return the message size in bytes, or in elements of ``datatype`` (a NumPy dtype)."""
        if datatype is None:
            return self.count
        import numpy as np
        return self.count // np.dtype(datatype).itemsize

    Get_elements = Get_count

    def Get_error(self) -> int:
        """Return the error code (0: success)."""
        return self.error

    def Is_cancelled(self) -> bool:
        """Return True when the receive was cancelled."""
        return self.cancelled

    def _fill(self, other: Status | None) -> None:
        if other is not None:
            self.source, self.tag, self.count = other.source, other.tag, other.count
            self.error, self.cancelled = other.error, other.cancelled

    def __repr__(self) -> str:
        return f"Status(source={self.source}, tag={self.tag}, count={self.count})"


def translate(comm: Communicator | None, exc: BaseException) -> BaseException:
    """Return ``exc`` naming ranks of ``comm`` instead of engine endpoints."""
    if comm is None:
        return exc
    if isinstance(exc, TruncationError):
        source = comm._rank_of(exc.source)
        size = "" if exc.size is None else f"{exc.size} bytes, "
        return TruncationError(
            f"{comm.name}: message from rank {source} with tag {exc.tag} is {size}larger "
            f"than the receive buffer of {exc.capacity} bytes",
            source=source, tag=exc.tag, size=exc.size, capacity=exc.capacity, code=exc.code)
    if isinstance(exc, PeerExited):
        peer = comm._rank_of(exc.peer)
        tag = "any tag" if exc.tag in (None, -1) else f"tag {exc.tag}"
        return PeerExited(f"{comm.name}: rank {comm.rank} waits for a message from rank "
                          f"{peer} ({tag}), but rank {peer} exited without sending it",
                          peer=peer, waiter=comm.rank, tag=exc.tag, code=exc.code)
    if isinstance(exc, PeerLost):
        peer = comm._rank_of(getattr(exc, "peer", None))
        return PeerLost(f"{comm.name}: rank {peer} lost ({exc})", peer=peer, code=exc.code)
    return exc


class Request(metaclass=ABCMeta):
    """A non-blocking operation: ``wait``/``test`` (objects), ``Wait``/``Test`` (buffers).

    Built by the communicator from a generator; see the module docstring. The binding's
    request of a buffer's ``Isend``/``Irecv`` (``coc._engine.BufferRequest``, the fast
    path) has the same methods and counts as one (the engine port registers it).
    """

    # mpi4py's class-level names for the module's functions (set at the end of the module)
    waitall: ClassVar[Callable[..., list[Any]]]
    Waitall: ClassVar[Callable[..., bool]]
    waitany: ClassVar[Callable[..., tuple[int, Any]]]
    Waitany: ClassVar[Callable[..., int]]
    testall: ClassVar[Callable[..., tuple[bool, list[Any] | None]]]
    Testall: ClassVar[Callable[..., bool]]
    testany: ClassVar[Callable[..., tuple[int, bool, Any]]]

    def __init__(self, steps: Steps[Any] | None, comm: Communicator | None = None) -> None:
        self._steps, self._comm = steps, comm
        self._parts: Sequence[Part] = []
        self._value: Any = None
        self._status: Status | None = None
        self._error: BaseException | None = None
        self._done = False
        self._step(None)

    # -- driving the generator ------------------------------------------------------------
    def _step(self, statuses: list[Envelope] | None = None,
              error: BaseException | None = None) -> None:
        """Resume the generator with the statuses of its parts, or throw a part's error in."""
        assert self._steps is not None  # only Single has none, and it steps itself
        try:
            if error is None:
                # None starts the generator (its first send)
                self._parts = self._steps.send(statuses)  # type: ignore[arg-type]
            else:
                self._parts = self._steps.throw(error)
        except StopIteration as stop:
            self._finish(stop.value)
        except Exception as exc:  # noqa: BLE001 - kept and raised by wait/test
            self._error = self._translate(exc)
            self._done, self._parts = True, []

    def _finish(self, value: Any) -> None:
        self._done, self._parts = True, []
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Status):
            self._value, self._status = value
        else:
            self._value = value

    def _translate(self, exc: BaseException) -> BaseException:
        return translate(self._comm, exc)

    def _progress(self) -> bool:
        """Advance without blocking; return True once complete."""
        while not self._done:
            statuses: list[Envelope] = []
            try:
                for part in self._parts:
                    st = part.test()
                    if st is None:
                        return False
                    statuses.append(st)
            except Exception as exc:  # noqa: BLE001 - the generator may handle it
                self._step(error=exc)
                continue
            self._step(statuses)
        return True

    def _block(self, timeout: float | None = None) -> None:
        """Advance until complete (``timeout`` seconds per engine wait)."""
        while not self._done:
            try:
                statuses = [part.wait(timeout=timeout) for part in self._parts]
            except CocTimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - the generator may handle it
                self._step(error=exc)
                continue
            self._step(statuses)

    def _result(self, status: Status | None) -> Any:
        if status is not None and self._status is not None:
            status._fill(self._status)
        if self._error is not None:
            raise self._error
        return self._value

    # -- mpi4py's names -------------------------------------------------------------------
    def wait(self, status: Status | None = None, timeout: float | None = None) -> Any:
        """Block until complete; return the received object (None for sends)."""
        self._block(timeout)
        return self._result(status)

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """Return ``(True, object)`` once complete, else ``(False, None)``."""
        if self._progress():
            return True, self._result(status)
        return False, None

    def Wait(self, status: Status | None = None, timeout: float | None = None) -> bool:
        """Block until complete; fill ``status``; return True."""
        self.wait(status, timeout)
        return True

    def Test(self, status: Status | None = None) -> bool:
        """Return True once complete (filling ``status``), else False."""
        return self.test(status)[0]

    def get_status(self, status: Status | None = None) -> bool:
        """Return True once complete, filling ``status``; does not consume the result."""
        done = self._progress()
        if done and status is not None and self._status is not None:
            status._fill(self._status)
        return done

    Get_status = get_status

    def cancel(self) -> bool:
        """Cancel a receive that has not matched yet; it then completes as cancelled."""
        cancelled = any(part.cancel() for part in self._parts if hasattr(part, "cancel"))
        if cancelled:
            if self._steps is not None:
                self._steps.close()
            status = Status()
            status.cancelled = True
            self._done, self._parts, self._value, self._status = True, [], None, status
        return cancelled

    Cancel = cancel

    def Free(self) -> None:
        """Forget the request (the engine still completes it)."""

    @property
    def done(self) -> bool:
        """True once complete."""
        return self._progress()

    def _engine_fd(self) -> int | None:
        comm = self._comm
        return None if comm is None else comm._world.port.fileno()

    def __await__(self) -> Generator[Any, None, Any]:
        return awaiting(self)


def awaiting(request: Any) -> Generator[Any, None, Any]:
    """``await request``: its result without blocking the event loop (:mod:`coc.comm.aio`)."""
    from coc.comm import aio
    return aio.wait(request).__await__()



class Single(Request):
    """A request of exactly one message (the general path's ``Isend``/``Irecv`` of a buffer).

    No generator to drive: the part's status completes it (a receive's status names the
    communicator's rank). The fast path's request is the binding's ``BufferRequest``,
    which does the same in C (tests/comm/test_fast_path.py compares the two); this one
    serves what the fast path hands on (the site's MPI, buffers it does not take).
    """

    _comm: Communicator                 # always set (a Request's may be None)

    def __init__(self, part: Part, comm: Communicator, receive: bool) -> None:
        self._steps, self._comm, self._receive = None, comm, receive
        self._parts, self._value, self._status, self._error = [part], None, None, None
        self._done = False

    def _step(self, statuses: list[Envelope] | None = None,
              error: BaseException | None = None) -> None:
        self._done, self._parts = True, []
        if error is not None:
            self._error = self._translate(error)
        elif self._receive:
            st = statuses[0]  # type: ignore[index]  # a part completed: its status came
            self._status = Status(self._comm._rank_of(st.source), st.tag, st.count)

    def wait(self, status: Status | None = None, timeout: float | None = None) -> Any:
        """Block until complete; return None (a buffer's request has no object)."""
        if not self._done:           # one part: no list of statuses, no loop
            try:
                st = self._parts[0].wait(timeout=timeout)
            except CocTimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - _step translates it
                self._step(error=exc)
            else:
                self._step([st])
        return self._result(status)


def run(steps: Steps[_T], comm: Communicator | None = None) -> _T:
    """Drive the generator ``steps`` to completion now and return its value."""
    statuses: Any = None            # None starts the generator
    error: BaseException | None = None
    try:
        while True:
            parts = steps.send(statuses) if error is None else steps.throw(error)
            error = None
            try:
                statuses = [part.wait() for part in parts]
            except Exception as exc:  # noqa: BLE001 - the generator may handle it
                error = exc
    except StopIteration as stop:
        value: _T = stop.value
        return value
    except (TruncationError, PeerLost) as exc:
        raise translate(comm, exc) from None


def _waitall(requests: Sequence[Request],
             statuses: Sequence[Status] | None = None) -> list[Any]:
    return [r.wait() if statuses is None else r.wait(statuses[i])
            for i, r in enumerate(requests)]


def _testall(requests: Sequence[Request],
             statuses: Sequence[Status] | None = None) -> tuple[bool, list[Any] | None]:
    if all(r._progress() for r in requests):
        return True, waitall(requests, statuses)
    return False, None


#: How :func:`waitall` and :func:`testall` go over a list: in Python here, in one call of
#: the binding once the engine port installed its own (:func:`use_batch`).
_batch: dict[str, Callable[..., Any]] = {"waitall": _waitall, "testall": _testall}


def use_batch(waitall: Callable[..., list[Any]],
              testall: Callable[..., tuple[bool, list[Any] | None]]) -> None:
    """Let :func:`waitall` and :func:`testall` be these functions (the engine port gives
    the binding's, which wait on a list of requests in one C call); the same results."""
    _batch["waitall"], _batch["testall"] = waitall, testall


def waitall(requests: Sequence[Request],
            statuses: Sequence[Status] | None = None) -> list[Any]:
    """Wait for every request; return the list of their results."""
    return _batch["waitall"](requests, statuses)


def testall(requests: Sequence[Request],
            statuses: Sequence[Status] | None = None) -> tuple[bool, list[Any] | None]:
    """Return ``(True, results)`` when every request is complete, else ``(False, None)``."""
    return _batch["testall"](requests, statuses)


def testany(requests: Sequence[Request | None],
            status: Status | None = None) -> tuple[int, bool, Any]:
    """Return ``(index, True, result)`` of a complete request, or ``(-1, False, None)``."""
    for i, r in enumerate(requests):
        if r is not None and r._progress():
            return i, True, r.wait(status)
    return -1, False, None


def waitany(requests: Sequence[Request | None], status: Status | None = None,
            timeout: float | None = None) -> tuple[int, Any]:
    """Wait until one request completes; return ``(index, result)``.

    Sleeps on the engine's pollable fd between checks (no busy loop).
    """
    import time
    if not any(r is not None for r in requests):
        return -1, None
    deadline = None if timeout is None else time.monotonic() + timeout
    fds = {fd for r in requests if r is not None and (fd := r._engine_fd()) is not None}
    while True:
        for r in requests:
            if r is not None and r._comm is not None:
                r._comm._world.port.drain()
                break
        index, done, value = testany(requests, status)
        if done:
            return index, value
        slice_ = 0.001 if any(r is not None and r._comm is not None and r._comm._world.port.polls
                              for r in requests) else 0.05    # the site's MPI has no fd
        left = slice_ if deadline is None else min(slice_, deadline - time.monotonic())
        if left <= 0:
            raise CocTimeoutError(f"waitany: no request complete after {timeout} s")
        if fds:
            select.select(list(fds), [], [], left)
        else:
            time.sleep(min(left, 0.001))


def _all_done(requests: Sequence[Request], statuses: Sequence[Status] | None = None) -> bool:
    waitall(requests, statuses)
    return True


# mpi4py's class-level names.
Request.waitall = staticmethod(waitall)
Request.Waitall = staticmethod(_all_done)
Request.waitany = staticmethod(waitany)
Request.Waitany = staticmethod(lambda requests, status=None: waitany(requests, status)[0])
Request.testall = staticmethod(testall)
Request.Testall = staticmethod(lambda requests, statuses=None: testall(requests, statuses)[0])
Request.testany = staticmethod(testany)
