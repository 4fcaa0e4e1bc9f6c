"""mpi4py's communicators and groups over coc's :class:`~coc.comm.Communicator`.

``Intracomm`` wraps one of coc's communicators and gives it mpi4py's names and semantics:
``MPI.Datatype`` buffer specifications, ``COMM_NULL`` instead of None, requests that become
inactive, ``MPI.Exception`` for errors, groups, attributes. coc's own additions (sites,
levels, asyncio) stay on coc's communicator (:func:`coc.mpi4py.coc_communicator`).
``COMM_WORLD`` and ``COMM_SELF`` join the job on first use, as ``coc.COMM_WORLD`` does.
"""

import functools
import threading

import numpy as np

from coc.comm import request as coc_request
from coc.comm.buffers import IN_PLACE
from coc.comm.collectives import base, flat
from coc.comm.communicator import (ANY_SOURCE, ANY_TAG, MAX_TAG, PROC_NULL, UNDEFINED,
                                   Communicator)
from coc.comm.communicator import _op
from coc.comm.ops import SUM
from coc.mpi4py._known import refusing
from coc.mpi4py.errors import CODES, Exception
from coc.mpi4py.messages import message, vector
from coc.errors import CocError
from coc.mpi4py.requests import Message, Request, Status, _empty, raise_as_mpi

__all__ = ["Comm", "Intracomm", "Group", "COMM_NULL", "COMM_SELF", "COMM_WORLD",
           "GROUP_EMPTY", "GROUP_NULL", "IDENT", "CONGRUENT", "SIMILAR", "UNEQUAL",
           "COMM_TYPE_SHARED", "KEYVAL_INVALID", "TAG_UB", "APPNUM", "UNIVERSE_SIZE",
           "WTIME_IS_GLOBAL", "IO", "Errhandler", "ERRORS_RETURN", "ERRORS_ARE_FATAL",
           "ERRORS_ABORT", "ERRHANDLER_NULL", "INFO_NULL"]

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
COMM_TYPE_SHARED = 1
KEYVAL_INVALID = 603979776
#: the predefined attribute keys (their values come from the job).
TAG_UB, IO, WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE = range(1681915905, 1681915915, 2)
INFO_NULL = None


class Errhandler:
    """An error handler: coc raises ``MPI.Exception`` (mpi4py's default, ERRORS_RETURN)."""

    def __init__(self, name):
        self.name = name

    def Free(self):
        """Release the handler (predefined: nothing to release)."""

    def __repr__(self):
        return f"<coc.mpi4py.MPI.Errhandler {self.name}>"


ERRORS_RETURN, ERRORS_ARE_FATAL, ERRORS_ABORT, ERRHANDLER_NULL = (
    Errhandler(n) for n in ("ERRORS_RETURN", "ERRORS_ARE_FATAL", "ERRORS_ABORT", "NULL"))


class _Null:
    """coc side of ``COMM_NULL`` and freed communicators: every use is ``ERR_COMM``."""

    def __getattr__(self, name):
        if name.startswith("__"):            # introspection (doctest, copy) is not a use
            raise AttributeError(name)
        raise Exception(CODES["ERR_COMM"], "invalid communicator (MPI.COMM_NULL or freed)")


class _Joining:
    """coc side of ``COMM_WORLD``/``COMM_SELF`` before the job is joined: joins on first use."""

    def __init__(self, which):
        self._which = which

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        _join()
        return getattr(COMM_WORLD._c if self._which == "world" else COMM_SELF._c, name)


_NULL = _Null()
_join_lock = threading.Lock()


def _join():
    """Join the job (``coc.init()``); give ``COMM_WORLD`` and ``COMM_SELF`` their communicators."""
    with _join_lock:
        if not isinstance(COMM_WORLD._c, _Joining):
            return
        from coc.comm import world
        comm = world.init()
        state = comm._world
        block = state.next_block          # the same on every rank: reserved for COMM_SELF
        state.next_block += 1
        COMM_SELF._c = Communicator(state, [state.rank], block, "MPI_COMM_SELF")
        COMM_WORLD._c = comm


# -- keyvals and attributes ---------------------------------------------------------------
_keyvals: dict = {}    # keyval -> (copy_fn, delete_fn); kept after Free_keyval for the
_freed_keyvals: set = set()  # attributes still set under it (MPI deletes them with their comm)


def _translating(cls):
    """Class decorator: the public methods of ``cls`` raise coc's errors as MPI.Exception.

    The point-to-point calls a ping-pong makes (``_HOT``) translate in their own body
    instead: no wrapper call on the path where it would show.
    """
    for name, value in list(vars(cls).items()):
        if name.startswith("_") or not callable(value) or isinstance(value, type) \
                or name in _HOT:
            continue
        setattr(cls, name, _translated(value))
    return cls


_HOT = {"Send", "Ssend", "Rsend", "Isend", "Issend", "Irsend", "Recv", "Irecv"}


def _translated(function):
    @functools.wraps(function)
    def method(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (ValueError, CocError) as exc:
            raise_as_mpi(exc)
    return method


@refusing("Group")
class Group:
    """An ordered set of processes (mpi4py's ``Group``): ranks, inclusion, set operations."""

    def __init__(self, members, me):
        self._members, self._me = tuple(members), me     # world ranks; this process's

    def Get_size(self):
        """Return the number of processes."""
        return len(self._members)

    def Get_rank(self):
        """Return this process's rank in the group, or ``UNDEFINED``."""
        return self._members.index(self._me) if self._me in self._members else UNDEFINED

    size, rank = property(Get_size), property(Get_rank)

    def _world(self, ranks):
        for r in ranks:
            if not 0 <= r < len(self._members):
                raise Exception(CODES["ERR_RANK"], f"group rank {r} out of range "
                                f"0..{len(self._members) - 1}")
        return [self._members[r] for r in ranks]

    def Incl(self, ranks):
        """Return the group of the given ranks, in that order."""
        return Group(self._world(ranks), self._me)

    def Excl(self, ranks):
        """Return the group without the given ranks."""
        gone = set(self._world(ranks))
        return Group([w for w in self._members if w not in gone], self._me)

    @staticmethod
    def _expand(ranges):
        return [r for first, last, stride in ranges
                for r in range(first, last + (1 if stride > 0 else -1), stride)]

    def Range_incl(self, ranges):
        """Return the group of the ranks ``(first, last, stride)`` ranges name."""
        return self.Incl(self._expand(ranges))

    def Range_excl(self, ranges):
        """Return the group without the ranks the ranges name."""
        return self.Excl(self._expand(ranges))

    def Translate_ranks(self, ranks=None, group=None):
        """Return the ranks in ``group`` of this group's ``ranks`` (``UNDEFINED`` if absent)."""
        other = COMM_WORLD.Get_group() if group is None else group
        ranks = range(len(self._members)) if ranks is None else ranks
        where = {w: i for i, w in enumerate(other._members)}
        return [where.get(w, UNDEFINED) if w is not None else UNDEFINED
                for w in (self._members[r] if r != PROC_NULL else None for r in ranks)]

    def Compare(self, group):
        """Return ``IDENT`` (same order), ``SIMILAR`` (same members) or ``UNEQUAL``."""
        if self._members == group._members:
            return IDENT
        return SIMILAR if set(self._members) == set(group._members) else UNEQUAL

    @classmethod
    def Union(cls, group1, group2):
        """Return group1's processes, then group2's that are not in group1."""
        return cls(list(dict.fromkeys(group1._members + group2._members)), group1._me)

    @classmethod
    def Intersection(cls, group1, group2):
        """Return group1's processes that are also in group2, in group1's order."""
        return cls([w for w in group1._members if w in set(group2._members)], group1._me)

    Intersect = Intersection

    @classmethod
    def Difference(cls, group1, group2):
        """Return group1's processes that are not in group2."""
        return cls([w for w in group1._members if w not in set(group2._members)], group1._me)

    def Dup(self):
        """Return a copy of the group."""
        return Group(self._members, self._me)

    def Free(self):
        """Release the group (nothing to release)."""

    def __eq__(self, other):
        return isinstance(other, Group) and self._members == other._members

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<coc.mpi4py.MPI.Group of {len(self._members)}>"


GROUP_EMPTY = Group((), None)
GROUP_NULL = Group((), None)


class Comm:
    """A communicator (mpi4py's ``Comm``); the methods live on :class:`Intracomm`."""

    def __init__(self, comm=None, name=""):
        self._c = _NULL if comm is None else comm
        self._name, self._attrs = name, {}

    def __eq__(self, other):
        return isinstance(other, Comm) and self._c is other._c

    __hash__ = object.__hash__

    def __bool__(self):
        return self._c is not _NULL

    def __repr__(self):
        return f"<coc.mpi4py.MPI.{type(self).__name__} {self._name or 'communicator'}>"

    @classmethod
    def Get_parent(cls):
        """Return ``COMM_NULL``: coc does not spawn processes."""
        return COMM_NULL

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """Return a new attribute key; ``copy_fn(comm, keyval, value)`` copies it on ``Dup``."""
        keyval = max(_keyvals, default=1000) + 1
        _keyvals[keyval] = (copy_fn, delete_fn)
        return keyval

    @classmethod
    def Free_keyval(cls, keyval):
        """Forget ``keyval``; return ``KEYVAL_INVALID``."""
        _freed_keyvals.add(keyval)
        return KEYVAL_INVALID


@refusing("Comm")
@_translating
class Intracomm(Comm):
    """A communicator of one group of ranks: point to point, collectives, new communicators."""

    # -- identity -------------------------------------------------------------------------
    def Get_rank(self):
        """Return this process's rank."""
        return self._c.rank

    def Get_size(self):
        """Return the number of ranks."""
        return self._c.size

    rank, size = property(Get_rank), property(Get_size)

    def Get_name(self):
        """Return the communicator's name."""
        return self._name

    def Set_name(self, name):
        """Name the communicator."""
        self._name = name

    name = property(Get_name, Set_name)

    def Get_group(self):
        """Return the group of the communicator's ranks."""
        return Group(self._c._ranks, self._c._world.rank)

    group = property(Get_group)

    def Is_inter(self):
        """Return False (coc has intracommunicators only)."""
        return False

    def Is_intra(self):
        """Return True."""
        return True

    is_inter, is_intra = property(Is_inter), property(Is_intra)
    is_topo = property(lambda self: False)

    def Get_topology(self):
        """Return ``UNDEFINED``: no Cartesian or graph topology is attached."""
        return UNDEFINED

    topology = property(Get_topology)

    def Compare(self, comm):
        """Return ``IDENT``, ``CONGRUENT`` (same ranks in order), ``SIMILAR`` or ``UNEQUAL``."""
        if self._c is comm._c:
            return IDENT
        mine, theirs = self._c._ranks, comm._c._ranks
        if mine == theirs:
            return CONGRUENT
        return SIMILAR if set(mine) == set(theirs) else UNEQUAL

    def Get_errhandler(self):
        """Return ``ERRORS_RETURN``: errors raise ``MPI.Exception``."""
        return ERRORS_RETURN

    def Set_errhandler(self, errhandler):
        """Accept ``ERRORS_RETURN`` (errors raise ``MPI.Exception``); others are not provided."""
        if errhandler is not ERRORS_RETURN:
            raise NotImplementedError(f"Comm.Set_errhandler({errhandler.name}) is not supported "
                                      "by coc's mpi4py compatibility mode (only ERRORS_RETURN)")

    def Abort(self, errorcode=0):
        """End the whole job now with ``errorcode``."""
        self._c.Abort(errorcode)

    # -- attributes -----------------------------------------------------------------------
    def Get_attr(self, keyval):
        """Return the attribute stored under ``keyval`` (None if unset)."""
        if keyval == TAG_UB:
            return self._tag_ub()
        if keyval == UNIVERSE_SIZE:
            return COMM_WORLD.Get_size()
        predefined = {IO: ANY_SOURCE, WTIME_IS_GLOBAL: False, APPNUM: None}
        if keyval in predefined:
            return predefined[keyval]
        self._check_keyval(keyval)
        return self._attrs.get(keyval)

    def _tag_ub(self):
        """Return the largest tag: coc's, or the site's MPI's when that carries messages."""
        site_ub = self._c._world.port.tag_ub()
        return MAX_TAG if site_ub is None else min(MAX_TAG, site_ub)

    def Set_attr(self, keyval, attrval):
        """Store ``attrval`` under ``keyval`` (a key from ``Create_keyval``)."""
        self._check_keyval(keyval)
        if keyval in self._attrs:
            self.Delete_attr(keyval)
        self._attrs[keyval] = attrval

    def Delete_attr(self, keyval):
        """Remove the attribute, calling the key's ``delete_fn(comm, keyval, value)``."""
        self._check_keyval(keyval)
        self._delete_attr(keyval)

    def _delete_attr(self, keyval):
        value = self._attrs.pop(keyval, None)
        delete = _keyvals[keyval][1]
        if delete is not None:
            delete(self, keyval, value)

    @staticmethod
    def _check_keyval(keyval):
        if keyval not in _keyvals or keyval in _freed_keyvals:
            raise Exception(CODES["ERR_KEYVAL"], f"invalid attribute key {keyval}")

    def _copy_attrs(self, new):
        for keyval, value in self._attrs.items():
            copy = _keyvals.get(keyval, (None, None))[0]
            if copy is True:
                new._attrs[keyval] = value
            elif callable(copy):
                result = copy(self, keyval, value)
                if result is not NotImplemented:
                    new._attrs[keyval] = result
        return new

    # -- point to point: buffers ----------------------------------------------------------
    def Send(self, buf, dest, tag=0):
        """Send a buffer (``buf``, ``[buf, type]``, ``[buf, count, type]`` ...)."""
        try:
            self._c.Send(message(buf), dest, tag)
        except (ValueError, CocError) as exc:
            raise_as_mpi(exc)

    def Isend(self, buf, dest, tag=0):
        """Start sending a buffer; return a :class:`Request`."""
        try:
            return Request(self._c.Isend(message(buf), dest, tag))
        except (ValueError, CocError) as exc:
            raise_as_mpi(exc)

    Ssend = Rsend = Send
    Issend = Irsend = Isend

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receive into a buffer; a larger message raises ``MPI.Exception`` (ERR_TRUNCATE)."""
        try:
            self._c.Recv(message(buf), source, tag, status)
        except (ValueError, CocError) as exc:
            raise_as_mpi(exc)

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """Start receiving into a buffer; return a :class:`Request`."""
        try:
            return Request(self._c.Irecv(message(buf), source, tag))
        except (ValueError, CocError) as exc:
            raise_as_mpi(exc)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Send one buffer and receive into another at once."""
        self._c.Sendrecv(message(sendbuf), dest, sendtag, message(recvbuf), source, recvtag,
                         status)

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG,
                         status=None):
        """Send a buffer and receive into the same buffer."""
        arr = message(buf)
        staging, st = np.empty_like(arr), Status()
        self._c.Sendrecv(arr, dest, sendtag, staging, source, recvtag, st)
        n = st.count // arr.itemsize
        arr[:n] = staging[:n]
        if status is not None:
            status._fill(st)

    # Probe/Iprobe/Mprobe here and probe/iprobe/mprobe below are alike on purpose: mpi4py
    # names a buffer form and an object form of each, and each delegates to its own.
    def Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Wait until a buffer message matches; return True."""
        return self._c.Probe(source, tag, status)

    def Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Return True when a buffer message matches now."""
        return self._c.Iprobe(source, tag, status)

    def Mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Probe and take the matching buffer message; return a :class:`Message`."""
        if source == PROC_NULL:
            _empty(status)
            return Message(self._c.Irecv(np.empty(0, np.uint8), PROC_NULL), np.empty(0, np.uint8))
        st = Status()
        self._c.Probe(source, tag, st)
        return self._matched(st, status)

    def Improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Like :meth:`Mprobe` without waiting: None when nothing matches."""
        st = Status()
        if not self._c.Iprobe(source, tag, st):
            return None
        return self._matched(st, status)

    def _matched(self, st, status):
        staging = np.empty(st.count, np.uint8)
        request = self._c.Irecv(staging, st.source, st.tag)
        if status is not None:
            status._fill(st)
        return Message(request, staging)

    # -- point to point: objects ----------------------------------------------------------
    def send(self, obj, dest, tag=0):
        """Send a picklable object."""
        self._c.send(obj, dest, tag)

    ssend = send

    def isend(self, obj, dest, tag=0):
        """Start sending an object; return a :class:`Request`."""
        return Request(self._c.isend(obj, dest, tag))

    issend = isend

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receive and return an object."""
        return self._c.recv(buf, source, tag, status)

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        """Start receiving an object; ``wait()`` returns it."""
        return Request(self._c.irecv(buf, source, tag))

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Send an object and receive one at once."""
        return self._c.sendrecv(sendobj, dest, sendtag, recvbuf, source, recvtag, status)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Wait until an object matches; return True (``status`` counts its first message)."""
        return self._c.probe(source, tag, status)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Return True when an object matches now."""
        return self._c.iprobe(source, tag, status)

    def mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Probe and take the matching object; return a :class:`Message`."""
        if source == PROC_NULL:
            _empty(status)
            return Message(self._c.irecv(None, PROC_NULL))
        st = Status()
        self._c.probe(source, tag, st)
        if status is not None:
            status._fill(st)
        return Message(self._c.irecv(None, st.source, st.tag))

    def improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Like :meth:`mprobe` without waiting: None when nothing matches."""
        st = Status()
        if not self._c.iprobe(source, tag, st):
            return None
        if status is not None:
            status._fill(st)
        return Message(self._c.irecv(None, st.source, st.tag))

    # -- collectives: objects -------------------------------------------------------------
    def barrier(self):
        """Wait until every rank has entered."""
        self._c.barrier()

    def bcast(self, obj, root=0):
        """Return ``root``'s object on every rank."""
        return self._c.bcast(obj, root)

    def gather(self, sendobj, root=0):
        """Return the list of every rank's object at ``root`` (None elsewhere)."""
        return self._c.gather(sendobj, root)

    def scatter(self, sendobj, root=0):
        """Return item ``rank`` of ``root``'s sequence."""
        return self._c.scatter(None if sendobj is None else list(sendobj), root)

    def allgather(self, sendobj):
        """Return the list of every rank's object."""
        return self._c.allgather(sendobj)

    def alltoall(self, sendobj):
        """Return item ``rank`` of every rank's sequence."""
        return self._c.alltoall(list(sendobj))

    def reduce(self, sendobj, op=SUM, root=0):
        """Return ``op`` over every rank's object at ``root`` (None elsewhere)."""
        return self._c.reduce(sendobj, op, root)

    def allreduce(self, sendobj, op=SUM):
        """Return ``op`` over every rank's object."""
        return self._c.allreduce(sendobj, op)

    def scan(self, sendobj, op=SUM):
        """Return ``op`` over ranks ``0..rank``."""
        return self._c.scan(sendobj, op)

    def exscan(self, sendobj, op=SUM):
        """Return ``op`` over ranks ``0..rank-1`` (None at rank 0)."""
        return self._c.exscan(sendobj, op)

    # -- collectives: buffers -------------------------------------------------------------
    def Barrier(self):
        """Wait until every rank has entered."""
        self._c.barrier()

    def Bcast(self, buf, root=0):
        """Broadcast ``root``'s buffer into every rank's."""
        self._c.Bcast(message(buf), root)

    def _root_vector(self, spec, root):
        return vector(spec, self._c.size) if self._c.rank == root else None

    def Gather(self, sendbuf, recvbuf, root=0):
        """Gather equal pieces into ``root``'s buffer."""
        self._c.Gatherv(message(sendbuf), self._root_vector(recvbuf, root), root)

    Gatherv = Gather

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Scatter pieces of ``root``'s buffer."""
        self._c.Scatterv(self._root_vector(sendbuf, root), message(recvbuf), root)

    Scatterv = Scatter

    def Allgather(self, sendbuf, recvbuf):
        """Gather every rank's piece into every rank's buffer."""
        self._c.Allgatherv(message(sendbuf), vector(recvbuf, self._c.size))

    Allgatherv = Allgather

    def Alltoall(self, sendbuf, recvbuf):
        """Send piece ``r`` of the send buffer to rank ``r``."""
        self._c.Alltoallv(*self._alltoall_args(sendbuf, recvbuf))

    Alltoallv = Alltoall

    def _alltoall_args(self, sendbuf, recvbuf):
        recv = vector(recvbuf, self._c.size)
        if sendbuf is IN_PLACE:
            return [recv[0].copy(), *recv[1:]], recv
        return vector(sendbuf, self._c.size), recv

    def Reduce(self, sendbuf, recvbuf, op=SUM, root=0):
        """Reduce every rank's buffer with ``op`` into ``root``'s."""
        recv = message(recvbuf) if self._c.rank == root else None
        self._c.Reduce(message(sendbuf), recv, op, root)

    def Allreduce(self, sendbuf, recvbuf, op=SUM):
        """Reduce every rank's buffer with ``op`` into every rank's."""
        self._c.Allreduce(message(sendbuf), message(recvbuf), op)

    def Scan(self, sendbuf, recvbuf, op=SUM):
        """Reduce ranks ``0..rank`` into ``recvbuf``."""
        self._c.Scan(message(sendbuf), message(recvbuf), op)

    def Exscan(self, sendbuf, recvbuf, op=SUM):
        """Reduce ranks ``0..rank-1`` into ``recvbuf`` (unchanged at rank 0)."""
        self._c.Exscan(message(sendbuf), message(recvbuf), op)

    def _scatter_counts(self, sendbuf, recvbuf, recvcounts):
        """Return (input array, output array, counts, displacements) of a reduce-scatter."""
        out = message(recvbuf)
        data = out if sendbuf is IN_PLACE else message(sendbuf)
        counts = (list(recvcounts) if recvcounts is not None
                  else self._c.allgather(len(out)))
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int)
        return data, out, counts, displs

    def _reduce_scatter(self, sendbuf, recvbuf, recvcounts, op):
        data, out, counts, displs = self._scatter_counts(sendbuf, recvbuf, recvcounts)
        total = np.empty_like(data)
        self._c.Allreduce(data, total, op)
        me = self._c.rank
        out[:counts[me]] = total[displs[me]:displs[me] + counts[me]]

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        """Reduce with ``op``, then give rank ``r`` the ``recvcounts[r]`` elements of its part."""
        self._reduce_scatter(sendbuf, recvbuf, recvcounts, op)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=SUM):
        """Reduce with ``op``, then give each rank an equal block."""
        out = message(recvbuf)
        n = len(out) // self._c.size if sendbuf is IN_PLACE else len(out)
        self._reduce_scatter(sendbuf, recvbuf, [n] * self._c.size, op)

    # -- non-blocking collectives ---------------------------------------------------------
    def _start(self, steps, then=None):
        """Return a :class:`Request` running the generator ``steps`` under one tag."""
        c = self._c
        steps = base.one_tag(c, steps, c._next_collective_tag())
        return Request(coc_request.Request(steps if then is None else base.then(steps, then), c))

    def Ibarrier(self):
        """Start a barrier."""
        return self._start(flat.barrier(self._c))

    def Ibcast(self, buf, root=0):
        """Start broadcasting ``root``'s buffer."""
        return Request(self._c.Ibcast(message(buf), root))

    def Ireduce(self, sendbuf, recvbuf, op=SUM, root=0):
        """Start reducing into ``root``'s buffer."""
        c = self._c
        recv = message(recvbuf) if c.rank == root else None
        acc = c._accumulator(message(sendbuf), recv)
        return self._start(flat.reduce(c, acc, _op(op), root, True),
                           then=lambda result: _store(recv, result))

    def Iallreduce(self, sendbuf, recvbuf, op=SUM):
        """Start reducing into every rank's buffer."""
        return Request(self._c.Iallreduce(message(sendbuf), message(recvbuf), _op(op)))

    def Igather(self, sendbuf, recvbuf, root=0):
        """Start gathering into ``root``'s buffer."""
        piece = self._c._send_piece(message(sendbuf))
        return self._start(flat.gatherv(self._c, piece, self._root_vector(recvbuf, root), root))

    Igatherv = Igather

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Start scattering ``root``'s buffer."""
        recv = message(recvbuf)
        return self._start(flat.scatterv(self._c, self._root_vector(sendbuf, root),
                                         None if recv is IN_PLACE else recv, root))

    Iscatterv = Iscatter

    def Iallgather(self, sendbuf, recvbuf):
        """Start gathering into every rank's buffer."""
        c, recv = self._c, vector(recvbuf, self._c.size)
        piece = c._send_piece(message(sendbuf))
        if piece is None:
            arr, counts, displs = recv
            piece = arr[displs[c.rank]:displs[c.rank] + counts[c.rank]].copy()
        return self._start(_chain(flat.gatherv(c, piece, recv if c.rank == 0 else None, 0),
                                  flat.bcast(c, recv[0], 0, True)),
                           then=lambda result: _store(recv[0], result))

    Iallgatherv = Iallgather

    def Ialltoall(self, sendbuf, recvbuf):
        """Start an all-to-all exchange of buffer pieces."""
        return self._start(flat.alltoallv(self._c, *self._alltoall_args(sendbuf, recvbuf)))

    Ialltoallv = Ialltoall

    def _iscan(self, sendbuf, recvbuf, op, exclusive):
        recv = message(recvbuf)
        data = (recv if sendbuf is IN_PLACE else message(sendbuf)).copy()
        return self._start(flat.scan(self._c, data, _op(op), exclusive, True),
                           then=lambda result: _store(recv, result))

    def Iscan(self, sendbuf, recvbuf, op=SUM):
        """Start an inclusive scan."""
        return self._iscan(sendbuf, recvbuf, op, False)

    def Iexscan(self, sendbuf, recvbuf, op=SUM):
        """Start an exclusive scan (``recvbuf`` unchanged at rank 0)."""
        return self._iscan(sendbuf, recvbuf, op, True)

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        """Start a reduce-scatter with ``recvcounts`` elements per rank."""
        data, out, counts, displs = self._scatter_counts(sendbuf, recvbuf, recvcounts)
        me = self._c.rank

        def keep(total):
            out[:counts[me]] = total[displs[me]:displs[me] + counts[me]]
        return self._start(flat.allreduce(self._c, data.copy(), _op(op), True), then=keep)

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=SUM):
        """Start a reduce-scatter with equal blocks."""
        out = message(recvbuf)
        n = len(out) // self._c.size if sendbuf is IN_PLACE else len(out)
        return self.Ireduce_scatter(sendbuf, recvbuf, [n] * self._c.size, op)

    # -- new communicators ----------------------------------------------------------------
    def _wrap(self, comm, name):
        return COMM_NULL if comm is None else Intracomm(comm, name)

    def Dup(self, info=None):
        """Return a communicator of the same ranks with its own contexts (and attributes)."""
        return self._copy_attrs(Intracomm(self._c.Dup(), ""))

    Clone = Dup_with_info = Dup

    def Split(self, color=0, key=0):
        """Return the communicator of the ranks with the same ``color``, ordered by ``key``.

        ``color=UNDEFINED`` returns ``COMM_NULL``.
        """
        return self._wrap(self._c.Split(color, key), "")

    def Split_type(self, split_type, key=0, info=None):
        """Split by ``COMM_TYPE_SHARED``: the ranks on this rank's host (topology host)."""
        if split_type == UNDEFINED:
            color = UNDEFINED
        elif split_type == COMM_TYPE_SHARED:
            color = self._c.color("host")
        else:
            raise NotImplementedError(f"Comm.Split_type({split_type}) is not supported by "
                                      "coc's mpi4py compatibility mode (COMM_TYPE_SHARED only)")
        return self._wrap(self._c.Split(color, key), "")

    def Create(self, group):
        """Return the communicator of ``group``'s processes (collective over this one)."""
        rank = group.Get_rank()
        return self.Split(0 if rank != UNDEFINED else UNDEFINED, rank)

    def Create_group(self, group, tag=0):
        """Return the communicator of ``group`` (collective over ``group``'s processes only)."""
        c = self._c
        if group.Get_rank() == UNDEFINED:
            return COMM_NULL
        members = list(group._members)
        # agree on a context block among the members only, over this communicator's contexts
        # with tags apart from its own collectives
        among = Communicator(c._world, members, c._block, f"{c.name}.create_group")
        among._tags = (c._tags + (1 << 20) + tag) & ((1 << 29) - 1)
        block = among._agree_block()
        return Intracomm(Communicator(c._world, members, block, f"{c.name}.group"), "")

    def Free(self):
        """Release the communicator; it then equals ``COMM_NULL``."""
        if self is COMM_WORLD or self is COMM_SELF:
            raise Exception(CODES["ERR_COMM"], "MPI.COMM_WORLD and MPI.COMM_SELF cannot be freed")
        for keyval in list(self._attrs):
            self._delete_attr(keyval)
        self._c.Free()
        self._c = _NULL

    free = Free


def _store(out, result):
    if out is not None and result is not None and not np.shares_memory(out, result):
        out[...] = np.asarray(result).reshape(out.shape)


def _chain(*steps):
    """Return a generator running the generators ``steps`` one after another."""
    result = None
    for s in steps:
        result = yield from s
    return result


COMM_NULL = Intracomm(None, "MPI_COMM_NULL")
COMM_WORLD = Intracomm(_Joining("world"), "MPI_COMM_WORLD")
COMM_SELF = Intracomm(_Joining("self"), "MPI_COMM_SELF")
