"""Launch-to-first-message time: coc-run over two sites against MPICH's mpiexec, same run.

Every variant starts the same trivial program with 16 ranks (``--ranks``): each rank joins the
job (``coc.init()`` under coc-run, ``MPI_Init`` through mpi4py under mpiexec), then rank 0
sends one small object to the last rank, which prints the wall-clock time it got it.
Launch-to-first-message is that time minus the moment the launcher command was started (the
same clock: one machine); the wall time of the whole command, to its exit, is reported too,
and the CPU time (user + system) of every process of the launch, which the machine's load
hardly changes.

Variants, run round-robin so drifting load hits them alike:

- ``coc-run local``: ``coc-run -n 16`` on the built-in two-sites topology: 8 ranks per site,
  two agents, two gateway daemons; the message crosses both gateway daemons.
- ``coc-run netns`` (root): the same job in the two-sites testbed's network namespaces
  (``coc testbed up``, ``coc-run --testbed``; the testbed is built before and removed after).
- ``coc-run site a by mpiexec``: as ``local``, but MPICH's mpiexec starts site a's ranks.
- ``mpiexec``: MPICH's ``mpiexec -n 16`` (``pip install mpich mpi4py``), one host, no sites.

Medians over ``--repeat`` runs and the ratio of each coc variant to mpiexec. Unpinned: what
users get (see shared MEASURING.md). Run: ``python benchmarks/launch.py [--repeat N]
[--ranks N] [--no-netns] [--json FILE]``. Run by the launchers, the same file is one rank
(``--rank coc|mpi``).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from coc.pycommand import python_argv

TIMEOUT = 120
TESTBED = f"launch-bench-{os.getpid()}"
COC_RUN = python_argv("coc.launcher.cli")


def rank_main(kind):
    """Join the job, pass one message from rank 0 to the last rank, print when it came."""
    if kind == "coc":
        import coc
        comm = coc.init()
    else:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    last = comm.size - 1
    if comm.rank == 0:
        comm.send(b"first", dest=last, tag=1)
    if comm.rank == last:
        comm.recv(source=0, tag=1)
        print(f"first-message {time.time():.6f}", flush=True)


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv):
    """Run one launch; return seconds to the first message, to exit, and CPU seconds used."""
    cpu = _children_cpu()
    started = time.time()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                            stdin=subprocess.DEVNULL)
    ended = time.time()
    cpu = _children_cpu() - cpu
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr}")
    stamps = [float(line.split()[1]) for line in result.stdout.splitlines()
              if line.startswith("first-message ")]
    if len(stamps) != 1:
        raise RuntimeError(f"{' '.join(argv)} printed {result.stdout!r}")
    return stamps[0] - started, ended - started, cpu


def variants(ranks, netns):
    """Return ``{name: argv}`` of the launches to compare, and what was left out and why."""
    from coc.launcher.spawners.mpiexec import find_mpiexec
    me = os.path.abspath(__file__)
    coc = [sys.executable, me, "--rank", "coc"]
    found, skipped = {}, {}
    found["coc-run local"] = [*COC_RUN, "-n", str(ranks), *coc]
    if netns:
        found["coc-run netns"] = [*COC_RUN, "-n", str(ranks), "--testbed", TESTBED, *coc]
    mpiexec = find_mpiexec()
    if mpiexec is None:
        skipped["mpiexec"] = "no MPICH mpiexec (pip install mpich mpi4py)"
    else:
        half = ranks // 2
        found["coc-run site a by mpiexec"] = [*COC_RUN, "--site", f"a={half}", "--site",
                                              f"b={ranks - half}", "--spawner", "a=mpiexec",
                                              *coc]
        found["mpiexec"] = [mpiexec, "-n", str(ranks), sys.executable, me, "--rank", "mpi"]
    return found, skipped


def netns_reason():
    """Return why the namespace variant cannot run here, or None."""
    from coc.launcher import spawners
    if "netns" not in spawners.SPAWNERS:
        return "the netns spawner is not part of this coc"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


def _testbed(action):
    """Build (``up``) or remove (``down``) the benchmark's two-sites testbed."""
    topology = ["two-sites"] if action == "up" else []
    subprocess.run([*python_argv("coc.cli"), "testbed", action, *topology,
                    "--name", TESTBED], check=True, capture_output=True, timeout=TIMEOUT)


def measure(found, repeat):
    """Return ``{name: {"first": [s, ...], "exit": [...], "cpu": [...]}}``, runs interleaved."""
    times = {name: {"first": [], "exit": [], "cpu": []} for name in found}
    for name, argv in found.items():          # warm-up: page cache, .pyc files
        run_once(argv)
    for _ in range(repeat):
        for name, argv in found.items():
            for key, value in zip(("first", "exit", "cpu"), run_once(argv)):
                times[name][key].append(value)
    return times


def report(times, skipped, ranks, repeat):
    """Print the medians and ratios to mpiexec as a table."""
    print(f"launch of {ranks} ranks, median of {repeat} runs (unpinned, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    print(f"{'launcher':<28} {'first message':>14} {'exit':>8} {'CPU':>8} {'ratio':>7} "
          f"{'CPU ratio':>9}")
    base = {key: statistics.median(times["mpiexec"][key]) for key in ("first", "cpu")} \
        if "mpiexec" in times else None
    for name, t in times.items():
        first, end, cpu = (statistics.median(t[key]) for key in ("first", "exit", "cpu"))
        ratios = f"{first / base['first']:6.2f}x {cpu / base['cpu']:8.2f}x" if base else ""
        print(f"{name:<28} {first:>12.3f} s {end:>6.3f} s {cpu:>6.2f} s {ratios}")
    for name, why in skipped.items():
        print(f"{name:<28} not run: {why}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", choices=["coc", "mpi"], help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-netns", action="store_true", help="leave out the namespaces")
    parser.add_argument("--json", help="also write every time measured to this file")
    args = parser.parse_args()
    if args.rank:
        rank_main(args.rank)
        return 0
    why = "left out (--no-netns)" if args.no_netns else netns_reason()
    found, skipped = variants(args.ranks, netns=why is None)
    if why:
        skipped["coc-run netns"] = why
    if why is None:
        _testbed("up")
    try:
        times = measure(found, args.repeat)
    finally:
        if why is None:
            _testbed("down")
    report(times, skipped, args.ranks, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": args.ranks, "repeat": args.repeat, "times": times,
                       "skipped": skipped}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
