"""What one trial of each benchmark pattern does on each rank, and which ranks take part.

A pattern gives, for a message size, the *groups* of ranks it measures separately (one
pair within a host, one within a site, one across sites; or every rank for a collective)
and, for each rank of a group, a trial function ``op(start_ns, now) -> [(what, ns), ...]``
that performs one operation and returns this rank's times since the agreed start (``now``
reads the global clock):

- ``oneway``: a message's arrival at its receiver, measured on the global clock;
- ``half-rtt``: half a round trip as the sender sees it (what IMB and ping-pong tools report);
- ``completion``: when this rank finished a collective (MPIBench's per-process view).
"""

import numpy as np

from coc.bench.backend import group_class, pairs_by_class
from coc.bench.engine import aligned

__all__ = ["Pattern", "PATTERNS", "by_name", "sizes_for", "trials_for", "P2P_SIZES",
           "QUICK_P2P_SIZES"]

TAG = 7

P2P_SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20]
QUICK_P2P_SIZES = [8, 4096, 262144]
COLL_SIZES = [8, 512, 4096, 65536, 1 << 20]
QUICK_COLL_SIZES = [8, 65536]
ALLTOALL_SIZES = [8, 512, 4096, 65536]
QUICK_ALLTOALL_SIZES = [8, 4096]


def _filled(nbytes, dtype=np.uint8):
    """Return a page-aligned array of ``nbytes`` (rounded up to whole elements), filled."""
    itemsize = np.dtype(dtype).itemsize
    raw = aligned(-(-nbytes // itemsize) * itemsize)
    raw[:] = 1
    return raw.view(dtype)


class Pattern:
    """One benchmark pattern: its name, sizes, and its trial function on each rank."""

    name = ""
    bandwidth = False          # whether MB/s = size / time means something
    sizes, quick_sizes = [0], [0]

    def groups(self, backend):
        """Return ``[(class, pairs)]``: the rank groups measured separately."""
        return [(group_class(backend.locations), None)]

    def make(self, backend, size, pairs):
        """Return this rank's ``op(start_ns, now)`` for one trial, or None if it sits out."""
        raise NotImplementedError


class _PairPattern(Pattern):
    """A pattern between the first pair of each class (PingPong, PingPing)."""

    bandwidth = True
    sizes, quick_sizes = P2P_SIZES, QUICK_P2P_SIZES

    def groups(self, backend):
        return [(cls, pairs[:1]) for cls, pairs in pairs_by_class(backend.locations).items()]

    def make(self, backend, size, pairs):
        for a, b in pairs:
            if backend.rank in (a, b):
                first = backend.rank == a
                return self._op(backend.comm, b if first else a, first, size)
        return None


class PingPong(_PairPattern):
    """One side sends, the other receives and sends the message back."""

    name = "PingPong"

    def _op(self, comm, peer, first, size):
        sbuf, rbuf = _filled(size), _filled(size)

        def sender(start, now):
            comm.Send(sbuf, dest=peer, tag=TAG)
            comm.Recv(rbuf, source=peer, tag=TAG)
            return [("half-rtt", (now() - start) / 2)]

        def echo(start, now):
            comm.Recv(rbuf, source=peer, tag=TAG)
            t = now()
            comm.Send(sbuf, dest=peer, tag=TAG)
            return [("oneway", t - start)]

        return sender if first else echo


class PingPing(_PairPattern):
    """Both sides send to each other at once, then receive (IMB's PingPing)."""

    name = "PingPing"

    def _op(self, comm, peer, first, size):
        sbuf, rbuf = _filled(size), _filled(size)

        def both(start, now):
            req = comm.Isend(sbuf, dest=peer, tag=TAG)
            comm.Recv(rbuf, source=peer, tag=TAG)
            t = now()
            req.Wait()
            return [("oneway", t - start)]

        return both


class Isend(Pattern):
    """Every pair of a class sends at once (Isend, Recv): the network loaded by many pairs."""

    name = "Isend"
    bandwidth = True
    sizes, quick_sizes = P2P_SIZES, QUICK_P2P_SIZES

    def groups(self, backend):
        return list(pairs_by_class(backend.locations).items())

    def make(self, backend, size, pairs):
        comm = backend.comm
        for a, b in pairs:
            if backend.rank == a:
                sbuf = _filled(size)

                def send(start, now, peer=b):
                    comm.Isend(sbuf, dest=peer, tag=TAG).Wait()
                    return []
                return send
            if backend.rank == b:
                rbuf = _filled(size)

                def recv(start, now, peer=a):
                    comm.Irecv(rbuf, source=peer, tag=TAG).Wait()
                    return [("oneway", now() - start)]
                return recv
        return None


class _Collective(Pattern):
    """A collective over every rank; each rank reports its own completion."""

    def make(self, backend, size, pairs):
        call = self._call(backend.comm, size, backend.size)

        def op(start, now):
            call()
            return [("completion", now() - start)]
        return op


class Barrier(_Collective):
    name = "Barrier"

    def _call(self, comm, size, nprocs):
        return comm.Barrier


class Bcast(_Collective):
    name = "Bcast"
    bandwidth = True
    sizes, quick_sizes = COLL_SIZES, QUICK_COLL_SIZES

    def _call(self, comm, size, nprocs):
        buf = _filled(size)
        return lambda: comm.Bcast(buf, root=0)


class Allreduce(_Collective):
    """Sum of float64 vectors (sizes rounded up to whole elements)."""

    name = "Allreduce"
    bandwidth = True
    sizes, quick_sizes = COLL_SIZES, QUICK_COLL_SIZES

    def _call(self, comm, size, nprocs):
        sbuf, rbuf = _filled(size, np.float64), _filled(size, np.float64)
        return lambda: comm.Allreduce(sbuf, rbuf)


class Alltoall(_Collective):
    """Every rank sends ``size`` bytes to every rank."""

    name = "Alltoall"
    sizes, quick_sizes = ALLTOALL_SIZES, QUICK_ALLTOALL_SIZES

    def _call(self, comm, size, nprocs):
        sbuf, rbuf = _filled(size * nprocs), _filled(size * nprocs)
        return lambda: comm.Alltoall(sbuf, rbuf)


class Empty(Pattern):
    """No operation: how late after the agreed start each rank really begins (residual jitter)."""

    name = "Empty"

    def make(self, backend, size, pairs):
        return lambda start, now: [("completion", now() - start)]


PATTERNS = [Empty(), PingPong(), PingPing(), Isend(), Barrier(), Bcast(), Allreduce(),
            Alltoall()]


def by_name(names):
    """Return the patterns called ``names`` (case-insensitive), in the order given.

    Examples
    --------
    >>> [p.name for p in by_name(["pingpong", "Barrier"])]
    ['PingPong', 'Barrier']
    """
    known = {p.name.lower(): p for p in PATTERNS}
    unknown = [n for n in names if n.lower() not in known]
    if unknown:
        raise ValueError(f"unknown pattern {unknown[0]!r}: expected one of "
                         f"{', '.join(p.name for p in PATTERNS)}")
    return [known[n.lower()] for n in names]


def sizes_for(pattern, quick=False, sizes=None):
    """Return the message sizes to sweep for ``pattern`` (``sizes`` overrides the defaults).

    Examples
    --------
    >>> sizes_for(PATTERNS[0], sizes=[8, 64]), sizes_for(PATTERNS[1], sizes=[8, 64])
    ([0], [8, 64])
    """
    if pattern.sizes == [0]:
        return [0]
    if sizes:
        return list(sizes)
    return list(pattern.quick_sizes if quick else pattern.sizes)


def trials_for(size, quick=False, trials=None):
    """Return how many trials to time at ``size`` bytes (fewer for large messages).

    Examples
    --------
    >>> trials_for(8), trials_for(4 << 20), trials_for(8, quick=True)
    (300, 30, 40)
    """
    base, least = (trials, max(10, (trials or 0) // 10)) if trials else (
        (40, 10) if quick else (300, 30))
    return max(least, min(base, base * 65536 // max(size, 65536)))
