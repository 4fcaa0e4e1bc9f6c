"""A back-to-back ping-pong between ranks 0 and 1, timed per round trip (PMB's PingPong shape).

The papers' latency figures come from the Pallas/Intel MPI Benchmarks: many round trips
in a row, no pause between them. ``coc bench run`` instead starts every trial at an agreed
time after a pause (MPIBench's shape), which on a loaded machine adds a wake-up to each
trial; for a like-for-like comparison with the C ping-pong of the relay chain,
``coc bench reproduce`` runs this program under ``coc-run`` or MPICH's ``mpiexec``:

    coc-run -n 2 python -m coc.bench.pingpong --sizes 8,4096 --iterations 200 --out pp.json

Rank 0 writes ``{"meta": ..., "rows": [{"size", "samples"}]}``, samples being the half
round trips in µs. Other ranks sit out.
"""

import argparse
import json
import sys
import time

from coc.bench.backend import open_backend
from coc.bench.engine import aligned, iterations

__all__ = ["WARMUP", "pingpong", "main"]

WARMUP = 10
TAG = 11


def pingpong(comm, rank, size, count):
    """Run ``count`` timed round trips of ``size`` bytes; return rank 0's half round trips (µs)."""
    sbuf, rbuf = aligned(size), aligned(size)
    sbuf[:] = 1
    peer = 1 - rank
    samples = []
    for i in range(WARMUP + count):
        if rank == 0:
            t0 = time.perf_counter_ns()
            comm.Send(sbuf, dest=peer, tag=TAG)
            comm.Recv(rbuf, source=peer, tag=TAG)
            if i >= WARMUP:
                samples.append((time.perf_counter_ns() - t0) / 2e3)
        else:
            comm.Recv(rbuf, source=peer, tag=TAG)
            comm.Send(sbuf, dest=peer, tag=TAG)
    return samples


def main(argv=None):
    """Parse the options, run every size, and write the samples (rank 0)."""
    p = argparse.ArgumentParser(prog="python -m coc.bench.pingpong", description=__doc__)
    p.add_argument("--sizes", required=True, help="message sizes in bytes, N,N,...")
    p.add_argument("--iterations", type=int, metavar="N",
                   help="timed round trips per size (default: fewer for larger sizes)")
    p.add_argument("--quick", action="store_true", help="few round trips")
    p.add_argument("--out", required=True, help="JSON file rank 0 writes")
    args = p.parse_args(argv)
    backend = open_backend()
    if backend.size < 2:
        print("coc.bench.pingpong: needs at least 2 ranks", file=sys.stderr)
        return 2
    comm, rank = backend.comm, backend.rank
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        count = args.iterations or iterations(size, args.quick)
        comm.Barrier()
        samples = pingpong(comm, rank, size, count) if rank < 2 else []
        rows.append({"size": size, "samples": samples})
    comm.Barrier()
    if rank == 0:
        meta = {"library": backend.library, "locations": backend.locations[:2]}
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
