"""The site's own MPI inside a site: messages between ranks it started go through mpi4py.

When the ranks of a site were started by the site's ``mpiexec`` (``COC_SITE_MPI=1``) and
mpi4py is importable, a message between two ranks of that MPI job *and of the same site*
travels through the site's tuned MPI; everything else goes through the engine. Each coc
communicator gets, for its members in this MPI job, one MPI communicator per context slot
(``MPI_Comm_create_group``, collective over those members only), so contexts stay apart
as in the engine. A receive from ``ANY_SOURCE`` polls both: the engine's and MPI's probes,
then receives the probed message from its exact source; so does a receive without a buffer
(an object's message, of a size known only once probed), which then receives into memory
of the probed size.

Only the engine port (:mod:`coc.comm.port`) uses this module: it hands in the real
``mpi4py.MPI`` module and the engine, and decides per peer which of the two carries a
message (its ``MixedLanes``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from coc.comm.request import Envelope, Part

__all__ = ["SiteMPI", "MPIComm", "PartStatus", "pause"]

# The site's mpi4py is found at run time past coc's own import hook (coc.realmpi), so its
# module, communicators and requests are typed Any here.
_MPI = Any


class _Testable(Protocol):
    def test(self) -> Envelope | None: ...


class _Engine(Protocol):
    """What this module asks of the engine the port hands in (``coc._engine.Engine``)."""

    def iprobe(self, source: int, tag: int, context: int) -> Envelope | None: ...
    def irecv(self, buf: Any, source: int, tag: int, context: int) -> Part: ...
    def irecv_alloc(self, source: int, tag: int, context: int) -> Part: ...

_POLL_SLEEP = 20e-6      # seconds between polls of a receive that waits on two transports


def pause() -> None:
    """Yield the CPU briefly while polling two transports."""
    time.sleep(_POLL_SLEEP)


class PartStatus:
    """What an engine status has: source endpoint (world rank), tag, context, count."""

    __slots__ = ("source", "tag", "context", "count")

    def __init__(self, source: int, tag: int, context: int, count: int) -> None:
        self.source, self.tag, self.context, self.count = source, tag, context, count


class _MPIPart:
    """An MPI request shaped like an engine request (``test``, ``wait``, ``cancel``)."""

    def __init__(self, mpi: _MPI, request: _MPI, context: int, peer: int,
                 capacity: int | None = None) -> None:
        self.mpi, self.request, self.context = mpi, request, context
        self.peer, self.capacity = peer, capacity

    def _complete(self, block: bool) -> PartStatus | None:
        st = self.mpi.Status()
        try:
            done = self.request.Wait(st) if block else self.request.Test(st)
        except self.mpi.Exception as exc:
            if exc.Get_error_class() != self.mpi.ERR_TRUNCATE:
                raise
            from coc.errors import TruncationError
            raise TruncationError(
                f"message from endpoint {self.peer} with tag {st.Get_tag()} is larger than "
                f"the receive buffer of {self.capacity} bytes", source=self.peer,
                tag=st.Get_tag(), size=None, capacity=self.capacity) from None
        if not done:
            return None
        return PartStatus(self.peer, st.Get_tag(), self.context, st.Get_count(self.mpi.BYTE))

    def test(self) -> PartStatus | None:
        return self._complete(False)

    def wait(self, timeout: float | None = None) -> Envelope:
        if timeout is None:
            st = self._complete(True)
            assert st is not None     # a blocking MPI Wait completes
            return st
        return _poll(self, timeout)

    def message(self) -> None:
        return None

    def cancel(self) -> bool:
        self.request.Cancel()
        st = self.mpi.Status()
        self.request.Wait(st)
        return st.Is_cancelled()


class _ProbedPart:
    """A receive from ANY_SOURCE, or without a buffer: probe, then receive what was probed.

    It probes the engine and MPI (those of the two that can bring a message from its
    source), then receives the probed message from its exact source, into ``buf`` or,
    when ``buf`` is None, into memory of the probed size (``message()`` returns it).
    Such receives of one communicator claim messages in the order they were posted,
    whichever of them is tested, as MPI's posted receives match in posting order.
    """

    def __init__(self, comm: MPIComm, buf: Any, source: int, tag: int, slot: int) -> None:
        self.comm, self.buf, self.tag, self.slot = comm, buf, tag, slot
        self.source = source                     # world rank, or -1
        self.inner: Part | None = None
        self.cancelled = False
        self.data: Any = None                    # memory of the probed size (buf None)
        comm.any_parts.append(self)

    def test(self) -> Envelope | None:
        if self.inner is None:
            _claim(self.comm.any_parts)
            if self.inner is None:
                return None
        return self.inner.test()

    def _probe(self) -> tuple[bool, int, int, int] | None:
        """Return ``(mpi, source, tag, count)`` of a message this receive matches, or None.

        ``source`` is the engine endpoint (mpi False) or the rank in the MPI communicator.
        """
        comm, source, MPI = self.comm, self.source, self.comm.MPI
        if source < 0 or source not in comm.rank_of:
            st = comm.engine.iprobe(source, self.tag, comm.context + self.slot)
            if st is not None:
                return False, st.source, st.tag, st.count
        if source < 0 or source in comm.rank_of:
            mst = MPI.Status()
            if comm.comms[self.slot].Iprobe(
                    MPI.ANY_SOURCE if source < 0 else comm.rank_of[source],
                    MPI.ANY_TAG if self.tag < 0 else self.tag, mst):
                return True, mst.Get_source(), mst.Get_tag(), mst.Get_count(MPI.BYTE)
        return None

    def _takes(self, slot: int, tag: int, source: int) -> bool:
        """Return True when this receive matches a message on ``slot`` with ``tag`` from
        world rank ``source``."""
        return self.slot == slot and self.tag in (-1, tag) and self.source in (-1, source)

    def _receive(self, mpi: bool, source: int, tag: int, count: int) -> None:
        """Start the real receive of the probed message (exact source and tag)."""
        comm, context = self.comm, self.comm.context + self.slot
        if not mpi:
            engine = comm.engine
            self.inner = (engine.irecv_alloc(source, tag, context) if self.buf is None
                          else engine.irecv(self.buf, source, tag, context))
            return
        if self.buf is None:
            import numpy as np
            self.buf = self.data = np.empty(count, np.uint8)
        request = comm.comms[self.slot].Irecv([self.buf, comm.MPI.BYTE], source, tag)
        self.inner = _MPIPart(comm.MPI, request, context, comm.world_of[source],
                              _nbytes(self.buf))

    def wait(self, timeout: float | None = None) -> Envelope:
        return _poll(self, timeout)

    def message(self) -> Any:
        """Return the bytes received into memory of their size (a receive without ``buf``)."""
        if self.data is not None:
            return self.data
        return None if self.inner is None else self.inner.message()

    def cancel(self) -> bool:
        if self.inner is None:
            self.cancelled = True
            return True
        return False


def _claim(pending: list[_ProbedPart]) -> None:
    """Give probed messages to the pending ANY_SOURCE receives ``pending`` (oldest first).

    A message goes to the oldest pending receive it matches, not to the one whose probe
    found it: a message can become visible between the probes of two receives (MPICH's
    Iprobe drives progress but reports a message that progress brought only at its next
    call, as with a rank's messages to itself), and the newer one must not take it.
    """
    pending[:] = [part for part in pending if not part.cancelled]
    at = 0
    while at < len(pending):
        found = pending[at]._probe()
        if found is None:
            at += 1
            continue
        mpi, source, tag, count = found
        world = pending[at].comm.world_of[source] if mpi else source
        owner = next(p for p in pending if p._takes(pending[at].slot, tag, world))
        owner._receive(mpi, source, tag, count)
        pending.remove(owner)
        at = 0                      # older receives may match what arrived meanwhile


def _nbytes(buf: Any) -> int:
    return memoryview(buf).nbytes


def _poll(part: _Testable, timeout: float | None) -> Envelope:
    """Test ``part`` until complete; raise CocTimeoutError after ``timeout`` seconds."""
    from coc.errors import CocTimeoutError
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        st = part.test()
        if st is not None:
            return st
        if deadline is not None and time.monotonic() > deadline:
            raise CocTimeoutError(f"receive not complete after {timeout} s")
        pause()


class SiteMPI:
    """The MPI job this process belongs to, seen from coc: which world ranks it reaches."""

    def __init__(self, MPI: _MPI, rank: int, site: str) -> None:
        """``MPI`` is the real ``mpi4py.MPI``; collective over the MPI job."""
        self.MPI = MPI
        pairs = MPI.COMM_WORLD.allgather((rank, site))
        self.mpi_rank_of = {r: i for i, (r, s) in enumerate(pairs) if s == site}

    def communicator(self, ranks: Iterable[int], block: int, engine: _Engine, context: int,
                     slots: int) -> MPIComm | None:
        """Return the :class:`MPIComm` of a coc communicator of world ranks ``ranks``.

        None when fewer than two of them are in this MPI job (nothing goes through MPI).
        Collective over its members in this MPI job. ``block`` is the communicator's
        context block (it tags the MPI group), ``context`` its first engine context,
        ``slots`` the number of its contexts in use (one MPI communicator each).
        """
        members = [w for w in ranks if w in self.mpi_rank_of]
        if len(members) < 2:
            return None
        group = self.MPI.COMM_WORLD.Get_group().Incl([self.mpi_rank_of[w] for w in members])
        first = self.MPI.COMM_WORLD.Create_group(group, block % 32768)
        group.Free()
        comms = [first] + [first.Dup() for _ in range(slots - 1)]
        return MPIComm(self.MPI, comms, members, engine, context)


class MPIComm:
    """One coc communicator's MPI communicators, one per context slot, and its members.

    ``world_of[i]`` is the world rank of MPI rank ``i``, ``rank_of`` the inverse; the
    engine serves receives from any source (probed on both transports).
    """

    def __init__(self, MPI: _MPI, comms: list[_MPI], members: list[int], engine: _Engine,
                 context: int) -> None:
        self.MPI, self.comms, self.engine, self.context = MPI, comms, engine, context
        self.world_of = members
        self.rank_of = {w: i for i, w in enumerate(members)}
        self.any_parts: list[_ProbedPart] = []   # ANY_SOURCE receives not matched yet

    def isend(self, buf: Any, target: int, tag: int, slot: int) -> _MPIPart:
        """Start sending ``buf`` to world rank ``target`` through MPI."""
        request = self.comms[slot].Isend([buf, self.MPI.BYTE], self.rank_of[target], tag)
        return _MPIPart(self.MPI, request, self.context + slot, target)

    def irecv(self, buf: Any, source: int, tag: int, slot: int) -> _MPIPart | _ProbedPart:
        """Start receiving into ``buf`` from world rank ``source`` (-1: any) with ``tag``.

        ``buf`` None receives into memory of the message's size (``part.message()``).
        """
        if source < 0 or buf is None:
            return _ProbedPart(self, buf, source, tag, slot)
        mpi_tag = self.MPI.ANY_TAG if tag < 0 else tag
        request = self.comms[slot].Irecv([buf, self.MPI.BYTE], self.rank_of[source], mpi_tag)
        return _MPIPart(self.MPI, request, self.context + slot, source, _nbytes(buf))

    def iprobe(self, source: int, tag: int, slot: int) -> PartStatus | None:
        """Return the PartStatus of a matching MPI message not yet received, or None."""
        st = self.MPI.Status()
        mpi_source = self.MPI.ANY_SOURCE if source < 0 else self.rank_of[source]
        if self.comms[slot].Iprobe(mpi_source, self.MPI.ANY_TAG if tag < 0 else tag, st):
            return PartStatus(self.world_of[st.Get_source()], st.Get_tag(),
                              self.context + slot, st.Get_count(self.MPI.BYTE))
        return None
