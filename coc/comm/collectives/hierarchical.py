"""Topology-aware collectives: within each site, then between site leaders, then within sites.

As MPICH-G2's multilevel collectives: a communicator spanning sites is seen as a *local*
communicator per site (its lowest rank is the site's *leader*) and one *leaders*
communicator with a rank per site. A broadcast then crosses the gateways once per site
instead of once per rank on the far side; a reduction sends one partial result per site;
``alltoall`` bundles everything one site sends to another into one message per ordered
pair of sites. Reductions here assume a commutative operation (the caller picks the flat
algorithm otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from coc.comm.collectives import flat
from coc.comm.collectives.base import Call
from coc.comm.ops import Op
from coc.comm.request import Steps

if TYPE_CHECKING:
    from coc.comm.communicator import Communicator, _Hierarchy

__all__ = ["barrier", "bcast", "reduce", "allreduce", "gather", "allgather", "alltoall"]


def _move(local: Communicator, value: Any, source: int, dest: int, into: Any) -> Steps[Any]:
    """Pass ``value`` from local rank ``source`` to local rank ``dest`` (generator)."""
    c = Call(local, "move", source, buffer=into is not None)
    if local.rank == source:
        c.send(value, dest)
    elif local.rank == dest:
        value = yield from c.recv(source, into=into)
    yield from c.finish()
    return value


def barrier(comm: Communicator) -> Steps[None]:
    """Return once every rank has entered."""
    h = comm._hierarchy()
    yield from flat.barrier(h.local)
    if h.leaders is not None:
        yield from flat.barrier(h.leaders)
    yield from flat.bcast(h.local, np.empty(0, np.uint8), 0, buffer=True)


def bcast(comm: Communicator, value: Any, root: int, buffer: bool = False) -> Steps[Any]:
    """Return ``value`` of ``root`` on every rank."""
    h = comm._hierarchy()
    root_site, mine = h.site_of[root], h.site_of[comm.rank]
    if mine == root_site:
        value = yield from flat.bcast(h.local, value, h.local_rank[root], buffer)
    if h.leaders is not None:
        value = yield from flat.bcast(h.leaders, value, root_site, buffer)
    if mine != root_site:
        value = yield from flat.bcast(h.local, value, 0, buffer)
    return value


def reduce(comm: Communicator, value: Any, op: Op, root: int, buffer: bool = False) -> Steps[Any]:
    """Return ``op`` over every rank's ``value`` at ``root`` (None elsewhere)."""
    h = comm._hierarchy()
    root_site = h.site_of[root]
    part = yield from flat.reduce(h.local, value, op, 0, buffer)
    if h.leaders is not None:
        part = yield from flat.reduce(h.leaders, part, op, root_site, buffer)
    if h.site_of[comm.rank] == root_site and h.local_rank[root] != 0:
        into = np.empty_like(value) if buffer else None
        part = yield from _move(h.local, part, 0, h.local_rank[root], into)
    return part if comm.rank == root else None


def allreduce(comm: Communicator, value: Any, op: Op, buffer: bool = False) -> Steps[Any]:
    """Return ``op`` over every rank's ``value`` on every rank."""
    h = comm._hierarchy()
    part = yield from flat.reduce(h.local, value, op, 0, buffer)
    if h.leaders is not None:
        part = yield from flat.allreduce(h.leaders, part, op, buffer)
    if h.local.rank != 0:
        part = value if buffer else None
    return (yield from flat.bcast(h.local, part, 0, buffer))


def _assemble(h: _Hierarchy, per_site: Iterable[Sequence[Any]]) -> list[Any]:
    """Return the list in communicator rank order from per-site lists in local rank order."""
    out = [None] * len(h.site_of)
    for members, values in zip(h.members, per_site):
        for r, v in zip(members, values):
            out[r] = v
    return out


def gather(comm: Communicator, value: Any, root: int) -> Steps[list[Any] | None]:
    """Return the list of every rank's ``value`` at ``root`` (None elsewhere)."""
    h = comm._hierarchy()
    root_site = h.site_of[root]
    mine = yield from flat.gather(h.local, value, 0)
    if h.leaders is not None:
        per_site = yield from flat.gather(h.leaders, mine, root_site)
        mine = None if per_site is None else _assemble(h, per_site)
    if h.site_of[comm.rank] == root_site and h.local_rank[root] != 0:
        mine = yield from _move(h.local, mine, 0, h.local_rank[root], None)
    return mine if comm.rank == root else None


def allgather(comm: Communicator, value: Any) -> Steps[list[Any]]:
    """Return the list of every rank's ``value`` on every rank."""
    h = comm._hierarchy()
    mine = yield from flat.gather(h.local, value, 0)
    if h.leaders is not None:
        mine = _assemble(h, (yield from flat.allgather(h.leaders, mine)))
    return (yield from flat.bcast(h.local, mine, 0))


def alltoall(comm: Communicator, values: Any) -> Steps[list[Any]]:
    """Return item ``rank`` of every rank's ``values``; one message per pair of sites."""
    flat._check_length(comm, "alltoall", values)
    h = comm._hierarchy()
    rows = yield from flat.gather(h.local, values, 0)
    out = None
    if h.leaders is not None:
        assert rows is not None  # a leader is its site's local rank 0: the gather's root
        bundles = [[[row[d] for d in members] for row in rows] for members in h.members]
        got = yield from flat.alltoall(h.leaders, bundles)
        mine = h.members[h.site_of[comm.rank]]
        out = [[None] * comm.size for _ in mine]
        for members, matrix in zip(h.members, got):
            for src, row in zip(members, matrix):
                for j, item in enumerate(row):
                    out[j][src] = item
    return (yield from flat.scatter(h.local, out, 0))
