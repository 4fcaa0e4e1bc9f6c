"""What the mpi4py compatibility mode costs over coc's own API: ping-pong, same job, as ratios.

One ``coc-run --mpi4py`` job of two ranks measures both, interleaved repetition by
repetition so that both see the same machine: the mode as an mpi4py program writes it
(``comm.Send([buf, MPI.BYTE], ...)`` on ``MPI.COMM_WORLD``) and coc's own communicator
behind it (``comm.Send(buf, ...)`` on ``coc.mpi4py.coc_communicator(MPI.COMM_WORLD)``).
Two placements: both ranks on host a1 (shared memory, where a per-call cost shows most)
and one rank per site (through the gateway daemons).

Prints, per placement and size, the median half round trip of each API over many short
timed blocks, the spread (min..max over the blocks) and the ratios mode / coc of the medians
and of the best blocks (the issue's target: <= 1.10). On a loaded machine the best blocks
show the software paths; the medians show what the load did to both. Last, what the mode
adds to one ``Send``/``Recv`` call with the transport taken out (a stand-in that does
nothing), which load does not blur as much.

Run: ``python benchmarks/mpi4py_mode.py [--pin] [--repeat N] [--json FILE]``. Run by coc-run, the
same file is one rank (``--rank``).
"""

import argparse
import json
import statistics
import subprocess
import sys
from functools import partial

from roundtrips import buffer_round_trip

from coc.pycommand import python_argv

SIZES = [8, 1 << 20]
PLACEMENTS = {"same host": ["--site", "a=2"], "two sites": ["--site", "a=1", "--site", "b=1"]}
TIMEOUT = 600


def _iterations(size):
    """Round trips per timed block: short blocks, many of them, interleaved between the APIs."""
    return 200 if size <= 4096 else 20


def rank_main(repeat):
    """Measure both APIs in this job; rank 0 prints the results as one JSON line."""
    import numpy as np
    from mpi4py import MPI

    import coc.mpi4py

    mode = MPI.COMM_WORLD
    own = coc.mpi4py.coc_communicator(mode)
    rank = mode.Get_rank()
    peer = 1 - rank
    results = {}
    for size in SIZES:
        buf = np.zeros(size, np.uint8)
        # as an mpi4py program writes it ([buffer, datatype]), and through coc's own API
        mode_pingpong = partial(buffer_round_trip, mode, [buf, MPI.BYTE], rank, peer)
        own_pingpong = partial(buffer_round_trip, own, buf, rank, peer)

        times = {"mode": [], "coc": []}
        iterations = _iterations(size)
        for body in (mode_pingpong, own_pingpong):       # warm up both paths
            for _ in range(10):
                body()
        for _ in range(repeat):
            for name, body in (("mode", mode_pingpong), ("coc", own_pingpong)):
                mode.Barrier()
                start = MPI.Wtime()
                for _ in range(iterations):
                    body()
                times[name].append((MPI.Wtime() - start) / iterations / 2)
        results[size] = times
    if rank == 0:
        print(json.dumps(results), flush=True)


class _NoTransport:
    """A stand-in for coc's communicator whose calls do nothing: isolates what the mode adds."""

    def Send(self, buf, dest, tag):
        pass

    def Recv(self, buf, source, tag, status):
        pass


def call_cost():
    """Return ``{call: µs}``: what one mode call costs beyond coc's call, best of 7 x 20000."""
    import timeit

    import numpy as np

    from coc.mpi4py import MPI
    from coc.mpi4py.communicators import Intracomm

    stub = _NoTransport()
    comm = Intracomm(stub, "stub")
    buf = np.zeros(8, np.uint8)
    message = [buf, MPI.BYTE]
    calls = {"Send([buf, MPI.BYTE])": (lambda: comm.Send(message, 0, 1),
                                       lambda: stub.Send(buf, 0, 1)),
             "Recv([buf, MPI.BYTE])": (lambda: comm.Recv(message, 0, 1),
                                       lambda: stub.Recv(buf, 0, 1, None))}
    return {name: (min(timeit.repeat(mode, number=20000, repeat=7))
                   - min(timeit.repeat(own, number=20000, repeat=7))) / 20000 * 1e6
            for name, (mode, own) in calls.items()}


def _job(placement, repeat, pin):
    cmd = [*(["taskset", "-c", "0"] if pin else []), *python_argv("coc.launcher.cli"),
           "--mpi4py", *PLACEMENTS[placement], "--timeout", str(TIMEOUT), sys.executable,
           __file__, "--rank", "--repeat", str(repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 60)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("{"))
    return {int(size): times for size, times in json.loads(line).items()}


def _us(seconds):
    return f"{seconds * 1e6:.1f}"


def report(results):
    """Return the table of medians, spreads and ratios."""
    lines = ["| placement | size | coc API µs median (min..max) | mpi4py mode µs median "
             "(min..max) | mode / coc, medians | mode / coc, best blocks |",
             "|---|---:|---:|---:|---:|---:|"]
    for placement, by_size in results.items():
        for size, times in by_size.items():
            coc, mode = times["coc"], times["mode"]
            ratio = statistics.median(mode) / statistics.median(coc)
            best = min(mode) / min(coc)
            lines.append(f"| {placement} | {'8 B' if size == 8 else '1 MiB'} | "
                         f"{_us(statistics.median(coc))} ({_us(min(coc))}..{_us(max(coc))}) | "
                         f"{_us(statistics.median(mode))} ({_us(min(mode))}..{_us(max(mode))})"
                         f" | {ratio:.3f} | {best:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=41,
                        help="timed blocks per API and size, interleaved (41)")
    parser.add_argument("--pin", action="store_true",
                        help="run every process on CPU 0 (taskset -c 0): software paths only")
    parser.add_argument("--json", metavar="FILE", help="also write the raw times here")
    args = parser.parse_args(argv)
    if args.rank:
        rank_main(args.repeat)
        return 0
    results = {placement: _job(placement, args.repeat, args.pin) for placement in PLACEMENTS}
    print(f"half round trip{', every process on CPU 0' if args.pin else ''}, median over "
          "repetitions (min..max); 'mode' = comm.Send([buf, MPI.BYTE]) under coc-run "
          "--mpi4py, 'coc' = coc's Communicator")
    print(report(results))
    costs = call_cost()
    print("what the mode adds per call, beyond coc's own call (no transport; best of 7 x "
          "20000): " + ", ".join(f"{name} {us:.2f} µs" for name, us in costs.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pingpong": results, "call_cost_us": costs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
