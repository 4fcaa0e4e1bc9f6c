"""The communicator: mpi4py's point-to-point, collective and communicator methods over the engine.

Lowercase methods move any picklable object, uppercase ones move buffers (NumPy arrays,
``bytes``, ``bytearray``, ``memoryview``, mpi4py-style ``[buf, count, dtype]``) in place.
Each communicator owns its own engine contexts (see :mod:`coc.comm.transport`), agreed
collectively when it is made, so traffic of two communicators never mixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional, Union, overload

import numpy as np
import numpy.typing as npt

from coc.comm import transport
from coc.comm.buffers import IN_PLACE, as_array, as_vector, contiguous
from coc.comm.collectives import base, flat, hierarchical
from coc.comm.ops import SUM, Op
from coc.comm.request import Envelope, Part, Request, Single, Status, Steps, run, translate
from coc.errors import PeerLost, TruncationError

if TYPE_CHECKING:
    from coc.comm.port import Direct
    from coc.comm.world import World

__all__ = ["Communicator", "ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED"]

ANY_SOURCE = -1
ANY_TAG = -1
PROC_NULL = -2
UNDEFINED = -32766
MAX_TAG = transport.MAX_TAG
#: The point-to-point methods the engine port's fast path replaces per instance.
_DIRECT_METHODS = ("Send", "Recv", "send", "recv", "Sendrecv", "sendrecv", "Isend", "Irecv",
                   "isend", "irecv")

#: A buffer argument: a NumPy array, ``bytes``, ``bytearray``, ``memoryview`` or mpi4py's
#: ``[buf, count, dtype]`` (``[buf, counts, displs]`` for the vector collectives).
BufferArg = Any
#: A reduction: an :class:`Op`, or a function of two values (a non-commutative user op).
ReduceOp = Union[Op, Callable[[Any, Any], Any]]
#: A status to fill (mpi4py's ``status=``), or None.
StatusArg = Optional[Status]
#: A vector collective's buffer as :func:`coc.comm.buffers.as_vector` gives it:
#: (flat array, counts, displacements).
_Vector = tuple[npt.NDArray[Any], list[int], list[int]]


class _Hierarchy:
    """A communicator seen by site: local communicator, leaders communicator, rank maps."""

    def __init__(self, comm: Communicator) -> None:
        names = list(dict.fromkeys(comm.site_of(r) for r in range(comm.size)))
        self.site_of = [names.index(comm.site_of(r)) for r in range(comm.size)]
        self.members = [[r for r in range(comm.size) if self.site_of[r] == s]
                        for s in range(len(names))]
        self.local_rank = [self.members[s].index(r) for r, s in enumerate(self.site_of)]
        local = comm._split(self.site_of[comm.rank], comm.rank, f"{comm.name}/site")
        assert local is not None             # a site's index is never UNDEFINED
        self.local = local
        leader = self.local_rank[comm.rank] == 0
        self.leaders = comm._split(0 if leader else UNDEFINED, comm.rank,
                                   f"{comm.name}/leaders")


def _null() -> Steps[tuple[None, Status]]:
    """The steps of a send to or receive from ``PROC_NULL``: none (generator)."""
    yield from ()
    return None, Status(PROC_NULL, ANY_TAG, 0)


def _op(op: ReduceOp) -> Op:
    """Return ``op`` as an :class:`Op` (a plain function is a non-commutative user op)."""
    return op if isinstance(op, Op) else Op(op, commute=False)


class Communicator:
    """A group of ranks that exchange messages in their own contexts (mpi4py's ``Comm``).

    Obtain the world communicator from :func:`coc.init` and others with :meth:`Dup`,
    :meth:`Split` and :meth:`Split_level`.
    """

    def __init__(self, world: World, ranks: Iterable[int], block: int, name: str) -> None:
        self._world = world
        self._ranks = tuple(ranks)                     # world rank of each rank
        self._of_world: dict[int | None, int] = {w: r for r, w in enumerate(self._ranks)}
        self._context = block * transport.CONTEXTS
        self._block = block
        self._tags = 0
        self._op_tag: int | None = None   # set while a non-blocking collective advances
        self._hier: _Hierarchy | None = None
        self.name = name
        world.comm_names.setdefault(block, name)
        self.rank = self._of_world[world.rank]
        self.size = len(self._ranks)
        # How each peer is reached (the engine port: the engine, or the site's MPI).
        self._lanes = lanes = world.port.lanes(self._ranks, block, self._context,
                                               transport.SLOTS)
        # The fast path of point-to-point: with every peer through the engine, this
        # communicator's Send, Recv, send, recv, Sendrecv, sendrecv, Isend, Irecv, isend
        # and irecv are the binding's (one C call each, no Python frame; they come back
        # to the methods of this class for anything else). See docs/performance.md,
        # "Small messages from Python".
        self._fast = lanes.direct_path(self) if lanes.direct else None
        if self._fast is not None:
            for method in _DIRECT_METHODS:
                setattr(self, method, getattr(self._fast, method))
        # The fast path while a blocking flat collective runs (see collectives.base.Call).
        self._now: Direct | None = None
        self._sites: int | None = None     # how many sites the ranks are on, once asked

    # -- identity and topology ------------------------------------------------------------
    def Get_rank(self) -> int:
        """Return this process's rank in the communicator."""
        return self.rank

    def Get_size(self) -> int:
        """Return the number of ranks."""
        return self.size

    def Get_name(self) -> str:
        """Return the communicator's name."""
        return self.name

    @property
    def site(self) -> str:
        """The site this rank runs on."""
        return self._world.site

    @property
    def host(self) -> str:
        """The topology host this rank runs on."""
        return self._world.host

    def site_of(self, rank: int) -> str:
        """Return the site rank ``rank`` runs on."""
        return self._world.sites[self._ranks[rank]]

    def host_of(self, rank: int) -> str:
        """Return the host rank ``rank`` runs on."""
        return self._world.hosts[self._ranks[rank]]

    def color(self, level: str, rank: int | None = None) -> int:
        """Return the color of ``rank`` (default: this rank) at ``level`` (MPICH-G2's colors).

        Levels are ``"wan"``, ``"site"``, ``"network"`` and ``"host"``; ranks with the same
        color at a level can talk directly at that level (see ``coc.topology.levels``).
        """
        world_rank = self._ranks[self.rank if rank is None else rank]
        return self._world.color(level, world_rank)

    def colors(self, rank: int | None = None) -> dict[str, int]:
        """Return ``{level: color}`` of ``rank`` (default: this rank) at every level."""
        return {level: self.color(level, rank) for level in ("wan", "site", "network", "host")}

    def _site_count(self) -> int:
        if self._sites is None:     # (asked only after init() has learnt every rank's site)
            self._sites = len({self._world.sites[w] for w in self._ranks})
        return self._sites

    @overload
    def _rank_of(self, endpoint: int) -> int: ...
    @overload
    def _rank_of(self, endpoint: None) -> None: ...

    def _rank_of(self, endpoint: int | None) -> int | None:
        """Return the rank of world rank (engine endpoint) ``endpoint``, or it unchanged."""
        return self._of_world.get(endpoint, endpoint)

    def _endpoint(self, rank: int) -> int:
        if rank == ANY_SOURCE:
            return ANY_SOURCE
        if not 0 <= rank < self.size:
            raise ValueError(f"{self.name}: rank {rank} out of range 0..{self.size - 1}")
        return self._ranks[rank]

    def _irecv(self, buf: Any, source: int, tag: int, slot: int) -> Part:
        """Post a receive on context ``slot`` from rank ``source``: site MPI or the engine.

        ``buf`` None receives a message of any size into memory the engine (or MPI)
        allocates; the part's ``message()`` returns it.
        """
        return self._lanes.irecv(buf, self._endpoint(source), tag, slot)

    def _next_collective_tag(self) -> int:
        if self._op_tag is not None:
            return self._op_tag
        self._tags = (self._tags + 1) & transport.OWN_TAGS
        return self._tags

    def _nonblocking(self, name: str, *args: Any,
                     then: Callable[[Any], object] | None = None) -> Request:
        """Start flat collective ``name`` as a :class:`Request` (mpi4py's ``I...`` methods).

        Every message of the operation carries one tag taken now, in program order, so
        several operations in flight never take each other's messages.
        """
        steps = base.one_tag(self, getattr(flat, name)(self, *args),
                             self._next_collective_tag())
        return Request(steps if then is None else base.then(steps, then), self)

    def _hierarchy(self) -> _Hierarchy:
        if self._hier is None:
            self._hier = _Hierarchy(self)
        return self._hier

    def stats(self) -> dict[str, int]:
        """Return this process's message counters (see ``coc.comm.counters``)."""
        return dict(self._world.counters)

    def __repr__(self) -> str:
        return f"<coc.Communicator {self.name} rank {self.rank} of {self.size}>"

    # -- point to point: objects ----------------------------------------------------------
    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Start sending ``obj`` to ``dest``; return a :class:`Request`."""
        if dest == PROC_NULL:
            return Request(_null(), self)
        return Request(transport.sent([self._post_obj(obj, dest, tag)]), self)

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send ``obj`` to rank ``dest`` (returns when ``obj`` may be changed)."""
        if dest == PROC_NULL:
            return
        _check_tag(tag)
        _wait(self, transport.post_obj(self, obj, dest, tag, transport.OBJ))

    def _post_obj(self, obj: Any, dest: int, tag: int) -> Part:
        _check_tag(tag)
        return transport.post_obj(self, obj, dest, tag, transport.OBJ)

    def _recv_obj(self, source: int, tag: int) -> Steps[tuple[Any, Status]]:
        obj, st = yield from transport.recv_obj(self, source, tag, transport.OBJ)
        return obj, Status(self._rank_of(st.source), st.tag, st.count)

    def irecv(self, buf: BufferArg = None, source: int = ANY_SOURCE,
              tag: int = ANY_TAG) -> Request:
        """Start receiving an object; ``wait()`` returns it."""
        if source == PROC_NULL:
            return Request(_null(), self)
        self._endpoint(source)
        return Request(self._recv_obj(source, tag), self)

    def recv(self, buf: BufferArg = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: StatusArg = None) -> Any:
        """Receive and return an object from ``source`` with ``tag``."""
        if source == PROC_NULL:
            return self.irecv(buf, source, tag).wait(status)
        self._endpoint(source)
        obj, got = run(self._recv_obj(source, tag), self)
        if status is not None:
            status._fill(got)
        return obj

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: BufferArg = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: StatusArg = None) -> Any:
        """Send ``sendobj`` to ``dest`` and receive an object from ``source`` at once."""
        req = self.irecv(recvbuf, source, recvtag)
        sent = self.isend(sendobj, dest, sendtag)
        obj = req.wait(status)
        sent.wait()
        return obj

    def _probe(self, source: int, tag: int, ctx: int, status: StatusArg, block: bool) -> bool:
        st = self._lanes.probe(self._endpoint(source), tag, ctx, block)
        if st is None:
            return False
        if status is not None:
            status._fill(Status(self._rank_of(st.source), st.tag, st.count))
        return True

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: StatusArg = None) -> bool:
        """Block until an object from ``source`` with ``tag`` can be received; return True.

        ``status.count`` is the size of the object's message (its pickle and buffers).
        """
        return self._probe(source, tag, transport.OBJ, status, True)

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: StatusArg = None) -> bool:
        """Return True when an object from ``source`` with ``tag`` can be received now."""
        return self._probe(source, tag, transport.OBJ, status, False)

    # -- point to point: buffers ----------------------------------------------------------
    def Isend(self, buf: BufferArg, dest: int, tag: int = 0) -> Request:
        """Start sending the buffer ``buf`` to ``dest``; return a :class:`Request`."""
        _check_tag(tag)
        if dest == PROC_NULL:
            return Request(_null(), self)
        part = transport.post(self, contiguous(as_array(buf)), dest, tag, transport.BUF)
        return Single(part, self, False)

    def Send(self, buf: BufferArg, dest: int, tag: int = 0) -> None:
        """Send the buffer ``buf`` to rank ``dest``."""
        _check_tag(tag)
        if dest == PROC_NULL:
            return
        _wait(self, transport.post(self, contiguous(as_array(buf)), dest, tag, transport.BUF))

    def Irecv(self, buf: BufferArg, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving into the buffer ``buf``; return a :class:`Request`."""
        if source == PROC_NULL:
            return Request(_null(), self)
        return Single(self._irecv(as_array(buf), source, tag, transport.BUF), self, True)

    def Recv(self, buf: BufferArg, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: StatusArg = None) -> None:
        """Receive into the buffer ``buf``; a larger message raises TruncationError."""
        if source == PROC_NULL:
            self.Irecv(buf, source, tag).Wait(status)
            return
        st = _wait(self, self._irecv(as_array(buf), source, tag, transport.BUF))
        if status is not None:
            status._fill(Status(self._rank_of(st.source), st.tag, st.count))

    def Sendrecv(self, sendbuf: BufferArg, dest: int, sendtag: int = 0,
                 recvbuf: BufferArg = None, source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: StatusArg = None) -> None:
        """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` from ``source`` at once."""
        if source == PROC_NULL:
            self.Send(sendbuf, dest, sendtag)
            self.Irecv(recvbuf, source, recvtag).Wait(status)
            return
        req = self._irecv(as_array(recvbuf), source, recvtag, transport.BUF)
        self.Send(sendbuf, dest, sendtag)   # the receive is posted: no deadlock if both do it
        st = _wait(self, req)
        if status is not None:
            status._fill(Status(self._rank_of(st.source), st.tag, st.count))

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: StatusArg = None) -> bool:
        """Block until a buffer message from ``source`` with ``tag`` has arrived; return True."""
        return self._probe(source, tag, transport.BUF, status, True)

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: StatusArg = None) -> bool:
        """Return True when a buffer message from ``source`` with ``tag`` has arrived."""
        return self._probe(source, tag, transport.BUF, status, False)

    # -- collectives: objects -------------------------------------------------------------
    def _collective(self, name: str, algorithm: str | None, *args: Any,
                    commutative: bool = True) -> Any:
        """Run collective ``name`` with the multi-level or the flat algorithm."""
        if base.CHECK_ALL:
            base.check_signature(self, name, args)
        if (commutative and self._site_count() > 1
                and hasattr(hierarchical, name)
                and base.use_topology(self._site_count(), self.size, algorithm)):
            return run(getattr(hierarchical, name)(self, *args), self)
        self._now = self._fast            # receives wait at once: the call runs to its end
        try:
            return run(getattr(flat, name)(self, *args), self)
        finally:
            self._now = None

    def barrier(self, algorithm: str | None = None) -> None:
        """Return once every rank has entered."""
        self._collective("barrier", algorithm)

    Barrier = barrier

    def bcast(self, obj: Any = None, root: int = 0, algorithm: str | None = None) -> Any:
        """Return ``root``'s ``obj`` on every rank."""
        self._endpoint(root)
        return self._collective("bcast", algorithm, obj, root)

    def scatter(self, sendobj: Any = None, root: int = 0) -> Any:
        """Return item ``rank`` of ``root``'s list ``sendobj``."""
        self._endpoint(root)
        return self._collective("scatter", None, sendobj, root)

    def gather(self, sendobj: Any, root: int = 0,
               algorithm: str | None = None) -> list[Any] | None:
        """Return the list of every rank's ``sendobj`` at ``root`` (None elsewhere)."""
        self._endpoint(root)
        return self._collective("gather", algorithm, sendobj, root)

    def allgather(self, sendobj: Any, algorithm: str | None = None) -> list[Any]:
        """Return the list of every rank's ``sendobj`` on every rank."""
        return self._collective("allgather", algorithm, sendobj)

    def alltoall(self, sendobj: Any, algorithm: str | None = None) -> list[Any]:
        """Return item ``rank`` of every rank's list ``sendobj``, in rank order."""
        return self._collective("alltoall", algorithm, sendobj)

    def reduce(self, sendobj: Any, op: ReduceOp = SUM, root: int = 0,
               algorithm: str | None = None) -> Any:
        """Return ``op`` over every rank's ``sendobj`` at ``root`` (None elsewhere)."""
        self._endpoint(root)
        op = _op(op)
        return self._collective("reduce", algorithm, sendobj, op, root, commutative=op.commute)

    def allreduce(self, sendobj: Any, op: ReduceOp = SUM, algorithm: str | None = None) -> Any:
        """Return ``op`` over every rank's ``sendobj`` on every rank."""
        op = _op(op)
        return self._collective("allreduce", algorithm, sendobj, op, commutative=op.commute)

    def scan(self, sendobj: Any, op: ReduceOp = SUM) -> Any:
        """Return ``op`` over ranks ``0..rank``."""
        return self._collective("scan", None, sendobj, _op(op))

    def exscan(self, sendobj: Any, op: ReduceOp = SUM) -> Any:
        """Return ``op`` over ranks ``0..rank-1`` (None at rank 0)."""
        return self._collective("scan", None, sendobj, _op(op), True)

    # -- collectives: buffers -------------------------------------------------------------
    def Bcast(self, buf: BufferArg, root: int = 0, algorithm: str | None = None) -> None:
        """Broadcast ``root``'s buffer into ``buf`` on every rank."""
        self._endpoint(root)
        arr = as_array(buf)
        result = self._collective("bcast", algorithm, contiguous(arr), root, True)
        if result is not arr and self.rank != root:
            arr[...] = result.reshape(arr.shape)

    def _reduction_input(self, sendbuf: BufferArg, recvbuf: BufferArg) -> npt.NDArray[Any]:
        """Return a private copy of this rank's input (scans combine into it in place)."""
        return contiguous(as_array(recvbuf if sendbuf is IN_PLACE else sendbuf)).copy()

    def _accumulator(self, sendbuf: BufferArg, recvbuf: BufferArg) -> npt.NDArray[Any]:
        """Return a private array holding this rank's input: ``recvbuf`` itself when it can."""
        return self._accumulate(sendbuf, recvbuf)[0]

    def _accumulate(self, sendbuf: BufferArg, recvbuf: BufferArg
                    ) -> tuple[npt.NDArray[Any], bool]:
        """Return ``(accumulator, placed)``: :meth:`_accumulator`'s array, and whether it is
        ``recvbuf``'s own memory (then a result left in it needs no copy)."""
        out = None if recvbuf is None else as_array(recvbuf)
        data = out if sendbuf is IN_PLACE else as_array(sendbuf)
        if data is None:
            raise ValueError(f"{self.name}: IN_PLACE needs a receive buffer (rank {self.rank} "
                             f"has none: only the root of Reduce may pass IN_PLACE)")
        if out is not None and out.flags.c_contiguous and (
                sendbuf is IN_PLACE or out.dtype == data.dtype and out.size == data.size
                and not np.shares_memory(out, data)):
            if sendbuf is not IN_PLACE:
                out.reshape(-1)[...] = data.reshape(-1)
            return out.reshape(-1), True
        return contiguous(data).reshape(-1).copy(), False

    def Reduce(self, sendbuf: BufferArg, recvbuf: BufferArg, op: ReduceOp = SUM, root: int = 0,
               algorithm: str | None = None) -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` at ``root``."""
        self._endpoint(root)
        op = _op(op)
        acc, placed = self._accumulate(sendbuf, recvbuf if self.rank == root else None)
        result = self._collective("reduce", algorithm, acc, op, root, True,
                                  commutative=op.commute)
        if self.rank == root and not (placed and result is acc):
            _store(recvbuf, result)

    def Allreduce(self, sendbuf: BufferArg, recvbuf: BufferArg, op: ReduceOp = SUM,
                  algorithm: str | None = None) -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` on every rank."""
        op = _op(op)
        acc, placed = self._accumulate(sendbuf, recvbuf)
        result = self._collective("allreduce", algorithm, acc, op, True,
                                  commutative=op.commute)
        if not (placed and result is acc):      # else the result is in recvbuf already
            _store(recvbuf, result)

    def Scan(self, sendbuf: BufferArg, recvbuf: BufferArg, op: ReduceOp = SUM) -> None:
        """Store ``op`` over ranks ``0..rank`` of ``sendbuf`` into ``recvbuf``."""
        data = self._reduction_input(sendbuf, recvbuf)
        _store(recvbuf, self._collective("scan", None, data, _op(op), False, True))

    def Exscan(self, sendbuf: BufferArg, recvbuf: BufferArg, op: ReduceOp = SUM) -> None:
        """Store ``op`` over ranks ``0..rank-1`` into ``recvbuf`` (unchanged at rank 0)."""
        data = self._reduction_input(sendbuf, recvbuf)
        result = self._collective("scan", None, data, _op(op), True, True)
        if result is not None:
            _store(recvbuf, result)

    def _send_piece(self, sendbuf: BufferArg) -> npt.NDArray[Any] | None:
        return None if sendbuf is IN_PLACE else contiguous(as_array(sendbuf)).reshape(-1)

    def _multilevel(self, algorithm: str | None) -> bool:
        """Return True when the vector collectives should go through the multi-level ones."""
        return base.use_topology(self._site_count(), self.size, algorithm)

    def Gatherv(self, sendbuf: BufferArg, recvbuf: BufferArg, root: int = 0,
                algorithm: str | None = None) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf`` = [buf, counts, displs] at root."""
        self._endpoint(root)
        recv = as_vector(recvbuf, self.size) if self.rank == root else None
        piece = self._send_piece(sendbuf)
        if self._multilevel(algorithm):          # the pieces travel as (unpickled) arrays
            pieces = self.gather(piece, root, algorithm)
            if recv is not None and pieces is not None:   # both at the root
                _place(recv, pieces)
            return
        self._collective("gatherv", None, piece, recv, root)

    def Scatterv(self, sendbuf: BufferArg, recvbuf: BufferArg, root: int = 0) -> None:
        """Scatter the pieces of ``sendbuf`` = [buf, counts, displs] at root into ``recvbuf``."""
        self._endpoint(root)
        send = as_vector(sendbuf, self.size) if self.rank == root else None
        recv = None if recvbuf is IN_PLACE else as_array(recvbuf).reshape(-1)
        self._collective("scatterv", None, send, recv, root)

    def Allgatherv(self, sendbuf: BufferArg, recvbuf: BufferArg,
                   algorithm: str | None = None) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf`` = [buf, counts, displs] everywhere."""
        recv = as_vector(recvbuf, self.size)
        piece = self._send_piece(sendbuf)
        if piece is None:
            arr, counts, displs = recv
            piece = arr[displs[self.rank]:displs[self.rank] + counts[self.rank]].copy()
        if self._multilevel(algorithm):
            _place(recv, self.allgather(piece, algorithm))
            return
        self._collective("gatherv", None, piece, recv, 0)
        self.Bcast(recv[0], 0, algorithm)

    def Alltoallv(self, sendbuf: BufferArg, recvbuf: BufferArg,
                  algorithm: str | None = None) -> None:
        """Send piece ``r`` of ``sendbuf`` to rank ``r``, receiving into pieces of ``recvbuf``."""
        send, recv = as_vector(sendbuf, self.size), as_vector(recvbuf, self.size)
        if self._multilevel(algorithm):
            arr, counts, displs = send
            _place(recv, self.alltoall([arr[d:d + n] for n, d in zip(counts, displs)],
                                       algorithm))
            return
        self._collective("alltoallv", None, send, recv)

    Gather = Gatherv
    Scatter = Scatterv
    Allgather = Allgatherv
    Alltoall = Alltoallv

    # -- non-blocking collectives (flat algorithms) -----------------------------------------
    def ibarrier(self) -> Request:
        """Start a barrier; the request completes once every rank has entered."""
        return self._nonblocking("barrier")

    Ibarrier = ibarrier

    def ibcast(self, obj: Any = None, root: int = 0) -> Request:
        """Start a broadcast of ``root``'s ``obj``; ``wait()`` returns it."""
        self._endpoint(root)
        return self._nonblocking("bcast", obj, root)

    def Ibcast(self, buf: BufferArg, root: int = 0) -> Request:
        """Start broadcasting ``root``'s buffer into ``buf``."""
        self._endpoint(root)
        arr = as_array(buf)
        data = contiguous(arr)
        return self._nonblocking("bcast", data, root, True,
                                 then=lambda result: _store(buf, result))

    def ireduce(self, sendobj: Any, op: ReduceOp = SUM, root: int = 0) -> Request:
        """Start a reduction to ``root``; ``wait()`` returns the result there."""
        self._endpoint(root)
        return self._nonblocking("reduce", sendobj, _op(op), root)

    def iallreduce(self, sendobj: Any, op: ReduceOp = SUM) -> Request:
        """Start a reduction whose result every rank's ``wait()`` returns."""
        return self._nonblocking("allreduce", sendobj, _op(op))

    def Iallreduce(self, sendbuf: BufferArg, recvbuf: BufferArg, op: ReduceOp = SUM) -> Request:
        """Start reducing every rank's ``sendbuf`` into ``recvbuf`` on every rank."""
        return self._nonblocking("allreduce", self._accumulator(sendbuf, recvbuf), _op(op),
                                 True, then=lambda result: _store(recvbuf, result))

    def igather(self, sendobj: Any, root: int = 0) -> Request:
        """Start gathering every rank's ``sendobj`` at ``root``."""
        self._endpoint(root)
        return self._nonblocking("gather", sendobj, root)

    def iallgather(self, sendobj: Any) -> Request:
        """Start gathering every rank's ``sendobj`` on every rank."""
        return self._nonblocking("allgather", sendobj)

    def ialltoall(self, sendobj: Any) -> Request:
        """Start an all-to-all exchange of the items of ``sendobj``."""
        return self._nonblocking("alltoall", sendobj)

    # -- communicators --------------------------------------------------------------------
    def _agree_block(self) -> int:
        """Return a context block free on every rank (flat max-reduction of the next free)."""
        block = run(flat.allreduce(self, self._world.next_block, Op(max)), self)
        self._world.next_block = block + 1
        return block

    def _split(self, color: Any, key: int, name: str) -> Communicator | None:
        pairs = run(flat.allgather(self, (color, key)), self)
        block = self._agree_block()
        if color == UNDEFINED or color is None:
            return None
        members = sorted((k, r) for r, (c, k) in enumerate(pairs) if c == color)
        return Communicator(self._world, [self._ranks[r] for _, r in members], block, name)

    def Dup(self) -> Communicator:
        """Return a communicator of the same ranks with its own contexts."""
        return Communicator(self._world, self._ranks, self._agree_block(), f"{self.name}.dup")

    Clone = Dup

    def Split(self, color: Any = 0, key: int = 0) -> Communicator | None:
        """Return the communicator of the ranks that passed the same ``color``, ordered by key.

        ``color`` ``UNDEFINED`` (or None) returns None (mpi4py's ``COMM_NULL``).
        """
        return self._split(color, key, f"{self.name}.split({color})")

    def Split_level(self, level: str = "site", key: int | None = None) -> Communicator | None:
        """Return the communicator of the ranks with this rank's color at ``level``.

        ``Split_level("site")`` gives the ranks of this rank's site, ``"host"`` those of
        its host (MPICH-G2's topology depths).
        """
        return self._split(self.color(level), self.rank if key is None else key,
                           f"{self.name}.{level}")

    def Free(self) -> None:
        """Release the communicator (its contexts are not reused)."""
        self._hier = None

    def Abort(self, errorcode: int = 1) -> NoReturn:
        """End the whole job now with ``errorcode`` (coc-run stops every rank)."""
        import os
        import sys
        sys.stderr.write(f"{self.name}: rank {self.rank} called Abort({errorcode})\n")
        sys.stderr.flush()
        os._exit(errorcode)

    # -- asyncio --------------------------------------------------------------------------
    async def arecv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                    status: StatusArg = None) -> Any:
        """Receive an object without blocking the event loop (``await comm.arecv()``)."""
        from coc.comm import aio
        return await aio.wait(self.irecv(None, source, tag), status)

    async def asend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send ``obj`` without blocking the event loop (``await comm.asend(obj, dest)``)."""
        from coc.comm import aio
        await aio.wait(self.isend(obj, dest, tag))

    async def aRecv(self, buf: BufferArg, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                    status: StatusArg = None) -> None:
        """Receive into ``buf`` without blocking the event loop."""
        from coc.comm import aio
        await aio.wait(self.Irecv(buf, source, tag), status)

    async def aSend(self, buf: BufferArg, dest: int, tag: int = 0) -> None:
        """Send ``buf`` without blocking the event loop."""
        from coc.comm import aio
        await aio.wait(self.Isend(buf, dest, tag))


def _wait(comm: Communicator, request: Part) -> Envelope:
    """Wait for one engine request; name ranks of ``comm`` in its errors."""
    try:
        return request.wait()
    except (TruncationError, PeerLost) as exc:
        raise translate(comm, exc) from None


def _check_tag(tag: int) -> None:
    if not 0 <= tag <= MAX_TAG:
        raise ValueError(f"tag {tag} out of range 0..{MAX_TAG}")


def _place(recv: _Vector, pieces: Sequence[Any]) -> None:
    """Copy ``pieces[r]`` into piece ``r`` of ``recv`` = (array, counts, displs); None: skip."""
    arr, counts, displs = recv
    for piece, n, d in zip(pieces, counts, displs):
        if piece is not None:
            arr[d:d + n] = piece


def _store(recvbuf: BufferArg, result: Any) -> None:
    """Copy ``result`` into the receive buffer argument."""
    out = as_array(recvbuf)
    if not np.shares_memory(out, result):
        out[...] = np.asarray(result).reshape(out.shape)
