"""Compare coc's communicator with plain mpi4py + MPICH, same run, same placement, as ratios.

Two ranks on one host: coc through ``coc-run --site a=2`` (both ranks on host a1 of the
two-sites topology), mpi4py through MPICH's ``mpiexec -n 2`` (``pip install mpich mpi4py``).
Both run the same measuring code, written against the names the two APIs share:

- buffer ping-pong (``Send``/``Recv`` of uint8 arrays), half round trip and bandwidth;
- object ping-pong (``send``/``recv`` of a dict holding a float64 array);
- ``Allreduce`` of float64 arrays (SUM).

Ratios are coc / mpi4py time (latency; lower is better) and coc / mpi4py bandwidth (higher
is better). The issue's targets: 8-byte buffer ping-pong <= 1.5x, large-message bandwidth
>= 0.8x. ``--pin`` runs every process of both jobs on CPU 0 (``taskset -c 0``), which
compares software paths; unpinned is what users get (see shared MEASURING.md).

Run: ``python benchmarks/comm_vs_mpi4py.py [--pin] [--quick] [--repeat N] [--json FILE]``.
Run by the launchers, the same file is one rank (``--rank coc|mpi``).
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from functools import partial

from roundtrips import buffer_round_trip, object_round_trip

BUFFER_SIZES = [8, 1024, 65536, 1 << 20, 4 << 20]
OBJECT_SIZES = [8, 65536, 1 << 20]            # bytes of the array inside the object
ALLREDUCE_SIZES = [8, 65536, 1 << 20]
TIMEOUT = 300


def _iterations(size, quick):
    base = 300 if quick else 2000
    return max(20, min(base, int(base * 4096 / max(size, 4096))))


def _timed(comm, wtime, body, iterations, repeat):
    """Return the median over ``repeat`` runs of the time per iteration of ``body``."""
    body()                                   # warm up: connections, buffers
    times = []
    for _ in range(repeat):
        comm.Barrier()
        start = wtime()
        for _ in range(iterations):
            body()
        times.append((wtime() - start) / iterations)
    return statistics.median(times)


def measure(comm, wtime, op_sum, quick, repeat):
    """Return ``{test: {size: seconds}}`` measured between ranks 0 and 1 of ``comm``."""
    import numpy as np
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    results = {"buffer": {}, "object": {}, "allreduce": {}}
    for size in BUFFER_SIZES:
        pingpong = partial(buffer_round_trip, comm, np.zeros(size, np.uint8), rank, peer)
        results["buffer"][size] = _timed(comm, wtime, pingpong, _iterations(size, quick),
                                         repeat) / 2
    for size in OBJECT_SIZES:
        objpong = partial(object_round_trip, comm, {"step": 1, "data": np.zeros(size // 8)},
                          rank, peer)
        results["object"][size] = _timed(comm, wtime, objpong, _iterations(size, quick),
                                         repeat) / 2
    for size in ALLREDUCE_SIZES:
        send, recv = np.ones(size // 8), np.zeros(size // 8)
        results["allreduce"][size] = _timed(
            comm, wtime, lambda send=send, recv=recv: comm.Allreduce(send, recv, op_sum),
            _iterations(size, quick), repeat)
    return results


def rank_main(kind, quick, repeat):
    """Measure as one rank of a coc or an mpi4py job; rank 0 prints the JSON result."""
    if kind == "coc":
        import coc
        comm, wtime, op_sum = coc.init(), coc.Wtime, coc.SUM
    else:
        from mpi4py import MPI
        comm, wtime, op_sum = MPI.COMM_WORLD, MPI.Wtime, MPI.SUM
    results = measure(comm, wtime, op_sum, quick, repeat)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps(results), flush=True)


def _job(kind, pin, quick, repeat):
    """Run the two-rank job of ``kind`` and return its results."""
    me = [sys.executable, __file__, "--rank", kind, "--repeat", str(repeat)]
    me += ["--quick"] if quick else []
    if kind == "coc":
        cmd = [shutil.which("coc-run") or "coc-run", "--site", "a=2", "--timeout",
               str(TIMEOUT), *me]
    else:
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", "2", *me]
    if pin:
        cmd = ["taskset", "-c", "0", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 30)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return {test: {int(k): v for k, v in rows.items()}
                    for test, rows in json.loads(line[7:]).items()}
    raise SystemExit(f"{kind} job failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


def report(coc_results, mpi_results, title):
    """Return the table of both results and their ratios."""
    lines = [title, "", f"{'test':<10} {'size':>8} {'coc µs':>10} {'mpi4py µs':>10} "
             f"{'time ratio':>10} {'coc MB/s':>9} {'mpi MB/s':>9}"]
    for test in ("buffer", "object", "allreduce"):
        for size, t in coc_results[test].items():
            m = mpi_results[test][size]
            lines.append(f"{test:<10} {_size(size):>8} {t * 1e6:>10.1f} {m * 1e6:>10.1f} "
                         f"{t / m:>9.2f}x {size / t / 1e6:>9.0f} {size / m / 1e6:>9.0f}")
    small = coc_results["buffer"][8] / mpi_results["buffer"][8]
    big = mpi_results["buffer"][4 << 20] / coc_results["buffer"][4 << 20]
    lines += ["", f"8 B buffer ping-pong: coc / mpi4py = {small:.2f}x (target <= 1.5x)",
              f"4 MiB buffer bandwidth: coc / mpi4py = {big:.2f}x (target >= 0.8x)"]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", choices=["coc", "mpi"], help=argparse.SUPPRESS)
    p.add_argument("--pin", choices=["no", "yes", "both"], default="both", nargs="?",
                   const="yes", help="taskset -c 0 every process (default: both ways)")
    p.add_argument("--quick", action="store_true", help="fewer iterations")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    p.add_argument("--json", metavar="FILE", help="also write every result to FILE")
    args = p.parse_args(argv)
    if args.rank:
        return rank_main(args.rank, args.quick, args.repeat)
    everything = {}
    for pin in {"no": [False], "yes": [True], "both": [False, True]}[args.pin]:
        results = {kind: _job(kind, pin, args.quick, args.repeat) for kind in ("coc", "mpi")}
        label = "pinned (taskset -c 0)" if pin else "unpinned"
        everything[label] = results
        print(report(results["coc"], results["mpi"],
                     f"two ranks on one host, {label}; median of {args.repeat} runs"), "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
