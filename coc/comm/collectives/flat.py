"""Flat collective algorithms over all ranks of a communicator (generators, see ``base``).

Trees and exchanges that ignore the topology: binomial trees for ``bcast`` and ``reduce``,
recursive doubling for ``allreduce`` on power-of-two sizes, dissemination for ``barrier``,
direct exchange for ``gather``/``scatter``/``alltoall`` and the vector forms, a chain for
``scan``/``exscan``. Each serves object and buffer forms: ``buffer=True`` means the values
are NumPy arrays received in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from coc.comm.collectives.base import Call, CollectiveMismatchError
from coc.comm.ops import Op
from coc.comm.request import Steps
from coc.comm.transport import parallel

if TYPE_CHECKING:
    from coc.comm.communicator import Communicator

__all__ = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather",
           "alltoall", "scan", "gatherv", "scatterv", "alltoallv"]


def _like(value: Any, buffer: bool) -> Any:
    """Return a fresh receive array shaped like ``value`` (buffer forms) or None (objects)."""
    return np.empty_like(value) if buffer else None


def _combine(op: Op, acc: Any, other: Any, buffer: bool, acc_first: bool = True) -> Any:
    """Return ``op`` of the two operands in rank order; buffer forms update ``acc`` in place."""
    if buffer:
        return op.combine_into(acc, other, acc_first)
    return op(acc, other) if acc_first else op(other, acc)


#: The barrier's messages: empty, so one array serves every send and receive.
_TOKEN = np.empty(0, np.uint8)


def barrier(comm: Communicator) -> Steps[None]:
    """Return once every rank has entered (dissemination: log2(size) rounds)."""
    c = Call(comm, "barrier", buffer=True)
    dist = 1
    while dist < comm.size:
        c.send(_TOKEN, (comm.rank + dist) % comm.size)
        yield from c.recv((comm.rank - dist) % comm.size, into=_TOKEN)
        dist <<= 1
    yield from c.finish()


def bcast(comm: Communicator, value: Any, root: int, buffer: bool = False) -> Steps[Any]:
    """Return ``value`` of ``root`` on every rank (binomial tree)."""
    c = Call(comm, "bcast", root, buffer)
    size, rank = comm.size, comm.rank
    rel, mask = (rank - root) % size, 1
    while mask < size:
        if rel & mask:
            value = yield from c.recv((rank - mask) % size, into=value if buffer else None)
            break
        mask <<= 1
    mask >>= 1
    while mask:
        if rel + mask < size:
            c.send(value, (rank + mask) % size)
        mask >>= 1
    yield from c.finish()
    return value


def reduce(comm: Communicator, value: Any, op: Op, root: int, buffer: bool = False) -> Steps[Any]:
    """Return ``op`` over every rank's ``value`` at ``root`` (None elsewhere), in rank order.

    Buffer forms combine into ``value`` in place (the caller passes a private array).
    """
    if not op.commute and root != 0:
        result = yield from reduce(comm, value, op, 0, buffer)
        c = Call(comm, "reduce", root, buffer)
        if comm.rank == 0:
            c.send(result, root)
        elif comm.rank == root:
            result = yield from c.recv(0, into=_like(value, buffer))
        yield from c.finish()
        return result if comm.rank == root else None
    c = Call(comm, "reduce", root, buffer)
    size, rank = comm.size, comm.rank
    rel, mask, acc, tmp = (rank - root) % size, 1, value, _like(value, buffer)
    while mask < size:
        if rel & mask:
            c.send(acc, (rank - mask) % size)
            break
        if rel + mask < size:
            other = yield from c.recv((rank + mask) % size, into=tmp)
            acc = _combine(op, acc, other, buffer)
        mask <<= 1
    yield from c.finish()
    return acc if rank == root else None


def allreduce(comm: Communicator, value: Any, op: Op, buffer: bool = False) -> Steps[Any]:
    """Return ``op`` over every rank's ``value`` on every rank (buffers: in ``value``)."""
    size, rank = comm.size, comm.rank
    if size & (size - 1) == 0:               # recursive doubling
        c = Call(comm, "allreduce", buffer=buffer)
        acc, mask, tmp = value, 1, _like(value, buffer)
        while mask < size:
            partner = rank ^ mask
            c.send(acc, partner)
            other = yield from c.recv(partner, into=tmp)
            yield from c.finish()            # acc is sent before it changes in place
            acc = _combine(op, acc, other, buffer, acc_first=partner > rank)
            mask <<= 1
        return acc
    result = yield from reduce(comm, value, op, 0, buffer)
    if rank != 0:
        result = value if buffer else None
    return (yield from bcast(comm, result, 0, buffer))


def gather(comm: Communicator, value: Any, root: int) -> Steps[list[Any] | None]:
    """Return the list of every rank's ``value`` at ``root`` (None elsewhere)."""
    c = Call(comm, "gather", root)
    if comm.rank != root:
        c.send(value, root)
        yield from c.finish()
        return None
    values = yield from parallel(c.recv(r) for r in range(comm.size) if r != root)
    values.insert(root, value)
    return values


def _check_length(comm: Communicator, kind: str, values: Any) -> None:
    if values is None or len(values) != comm.size:
        got = "None" if values is None else f"{len(values)} items"
        raise CollectiveMismatchError(f"{comm.name}: {kind} needs one item per rank "
                                      f"({comm.size}), got {got}")


def scatter(comm: Communicator, values: Any, root: int) -> Steps[Any]:
    """Return item ``rank`` of ``root``'s list ``values``."""
    c = Call(comm, "scatter", root)
    if comm.rank == root:
        _check_length(comm, "scatter", values)
        for r in range(comm.size):
            if r != root:
                c.send(values[r], r)
        yield from c.finish()
        return values[root]
    return (yield from c.recv(root))


def allgather(comm: Communicator, value: Any) -> Steps[list[Any]]:
    """Return the list of every rank's ``value`` on every rank."""
    values = yield from gather(comm, value, 0)
    return (yield from bcast(comm, values, 0))


def alltoall(comm: Communicator, values: Any) -> Steps[list[Any]]:
    """Return the list whose item ``r`` is item ``rank`` of rank ``r``'s ``values``."""
    _check_length(comm, "alltoall", values)
    c = Call(comm, "alltoall")
    for r in range(comm.size):
        if r != comm.rank:
            c.send(values[r], r)
    got = yield from parallel(c.recv(r) for r in range(comm.size) if r != comm.rank)
    got.insert(comm.rank, values[comm.rank])
    yield from c.finish()
    return got


def scan(comm: Communicator, value: Any, op: Op, exclusive: bool = False,
         buffer: bool = False) -> Steps[Any]:
    """Return ``op`` over ranks ``0..rank`` (``exclusive``: ``0..rank-1``, None at rank 0)."""
    c = Call(comm, "exscan" if exclusive else "scan", buffer=buffer)
    rank = comm.rank
    prev = None
    if rank > 0:
        prev = yield from c.recv(rank - 1, into=_like(value, buffer))
    acc = value if rank == 0 else _combine(op, value, prev, buffer, acc_first=False)
    if rank < comm.size - 1:
        c.send(acc, rank + 1)
    yield from c.finish()
    return prev if exclusive else acc


def _pieces(arr: npt.NDArray[Any], counts: Sequence[int],
            displs: Sequence[int]) -> list[npt.NDArray[Any]]:
    return [arr[d:d + n] for n, d in zip(counts, displs)]


def gatherv(comm: Communicator, send: Any, recv: Any, root: int) -> Steps[None]:
    """Gather ``send`` of every rank into the pieces of ``recv`` = (array, counts, displs)."""
    c = Call(comm, "gatherv", root, buffer=True)
    if comm.rank != root:
        c.send(send, root)
        yield from c.finish()
        return
    pieces = _pieces(*recv)
    if send is not None:
        pieces[root][...] = send
    yield from parallel(c.recv(r, into=pieces[r]) for r in range(comm.size) if r != root)


def scatterv(comm: Communicator, send: Any, recv: Any, root: int) -> Steps[None]:
    """Scatter the pieces of ``send`` = (array, counts, displs) at ``root`` into ``recv``."""
    c = Call(comm, "scatterv", root, buffer=True)
    if comm.rank != root:
        yield from c.recv(root, into=recv)
        return
    pieces = _pieces(*send)
    for r in range(comm.size):
        if r != root:
            c.send(pieces[r], r)
    if recv is not None:
        recv[...] = pieces[root]
    yield from c.finish()


def alltoallv(comm: Communicator, send: Any, recv: Any) -> Steps[None]:
    """Send piece ``r`` of ``send`` to rank ``r``; receive rank r's into piece ``r`` of ``recv``."""
    c = Call(comm, "alltoallv", buffer=True)
    out, into = _pieces(*send), _pieces(*recv)
    for r in range(comm.size):
        if r != comm.rank:
            c.send(out[r], r)
    into[comm.rank][...] = out[comm.rank]
    yield from parallel(c.recv(r, into=into[r]) for r in range(comm.size) if r != comm.rank)
    yield from c.finish()
