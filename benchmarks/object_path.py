"""What an object message costs over a buffer, measured side by side in one job (issue 17).

Two ranks on one host ping-pong, in rounds, three phases one after the other: ``Send``/
``Recv`` of 8 B, ``send``/``recv`` of ``None`` (an object message with almost no pickle)
and of the 100-byte dict of ``small_messages.py``. Each round times ``--count`` round trips
per phase (median half round trip) and rotates the order, so that the phases share
whatever the waits do at that moment: how much more an object costs than a buffer is the
difference within a round, which load moves far less than the figures themselves (a
machine whose waits block adds its wake-up to every phase alike). coc (``coc-run --site
a=2``) and mpi4py + MPICH (``mpiexec -n 2``) run the same rounds.

Run: ``python benchmarks/object_path.py [--rounds 5] [--count 2000] [--pin] [--only
coc|mpi]``; another build: the same with ``PYTHONPATH`` its tree. Prints, per phase, the
median (min–max) over the rounds, then the object phases minus the buffer phase. Pinned
(``taskset -c 0``), coc's figures repeat within a few per cent (each message a switch
between the two ranks on one CPU: the software path); MPICH's spinning ranks starve each
other there (milliseconds per message), so ``--pin --only coc``.
"""

import argparse
import json
import os
import statistics
import sys

from pingpongs import median_half_round_trip, message_object
from roundtrips import buffer_round_trip, object_round_trip, run_two_ranks

PHASES = ("Send/Recv 8 B", "send/recv None", "send/recv 100-byte dict")
TIMEOUT = 600


def rank_main(kind, rounds, count):
    """Measure as one rank; rank 0 prints ``{phase: [median per round]}`` as JSON."""
    import numpy as np
    if kind == "coc":
        import coc
        comm, wtime = coc.init(), coc.Wtime
    else:
        from mpi4py import MPI
        comm, wtime = MPI.COMM_WORLD, MPI.Wtime
    rank = comm.Get_rank()
    peer = 1 - rank
    buf, obj = np.zeros(8, np.uint8), message_object("small")
    bodies = {PHASES[0]: lambda: buffer_round_trip(comm, buf, rank, peer),
              PHASES[1]: lambda: object_round_trip(comm, None, rank, peer),
              PHASES[2]: lambda: object_round_trip(comm, obj, rank, peer)}
    out = {name: [] for name in PHASES}
    for r in range(rounds):
        for name in PHASES[r % 3:] + PHASES[:r % 3]:
            out[name].append(median_half_round_trip(comm, wtime, rank, peer, bodies[name], count))
    comm.Barrier()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def report(kind, result):
    """Print the phases of one job and the object phases minus the buffer phase."""
    def cell(values):
        return (f"{statistics.median(values) * 1e6:6.2f} "
                f"({min(values) * 1e6:.2f}-{max(values) * 1e6:.2f})")
    print(f"{kind}: half round trip, µs, median (min-max) of {len(result[PHASES[0]])} rounds")
    for name in PHASES:
        print(f"  {name:26} {cell(result[name])}")
    for name in PHASES[1:]:
        extra = [o - b for o, b in zip(result[name], result[PHASES[0]])]
        print(f"  {name + ' - Send/Recv':26} {cell(extra)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", choices=["coc", "mpi"], help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=5, help="rounds of the three phases")
    p.add_argument("--count", type=int, default=2000, help="round trips per phase and round")
    p.add_argument("--pin", action="store_true", help="taskset -c 0 every process")
    p.add_argument("--only", choices=["coc", "mpi"], help="one of the two jobs")
    args = p.parse_args(argv)
    if args.rank:
        return rank_main(args.rank, args.rounds, args.count)
    with open("/proc/loadavg") as f:
        print(f"load average at start {f.read().split()[0]}")
    for kind in [args.only] if args.only else ["coc", "mpi"]:
        me = [sys.executable, os.path.abspath(__file__), "--rank", kind, "--rounds",
              str(args.rounds), "--count", str(args.count)]
        report(kind, run_two_ranks(kind, me, args.pin, TIMEOUT))
    return None


if __name__ == "__main__":
    main()
