"""``coc bench run``: the MPIBench-style measurement, run on every rank of a job.

Start it as the program of ``coc-run`` or ``mpiexec``::

    coc-run -n 4 python -m coc.bench run --quick --out bench-coc
    mpiexec -n 4 python -m coc.bench run --quick --out bench-mpi

Every rank calibrates its clock onto rank 0's (:mod:`coc.bench.clock`). For each pattern,
class of pair and size, the ranks first run a few untimed operations to learn how long one
takes; rank 0 then announces a start time and a gap, and trial ``k`` starts on every rank
at ``start + k * gap`` global time (the C kernel sleeps, then spins until then, GIL
released). Each rank records its own times; a trial whose start a rank reached late (the
previous one overran) is kept in the samples but left out of the statistics. Rank 0
gathers everything and writes the table, JSON, CSV and plots.
"""

import argparse
import datetime
import os
import sys
import time

import numpy as np

from coc.bench import clock as gclock
from coc.bench import patterns, report
from coc.bench.backend import open_backend
from coc.bench.cli import add_pattern
from coc.errors import CocError

__all__ = ["Progress", "measure_group", "run", "register", "main"]

WARMUP = 8                 # untimed operations before each group (connections, caches)
LEAD_NS = 10_000_000       # time between rank 0's announcement and the first trial
MIN_GAP_NS = 300_000       # least gap between trial starts
SLEEP_MARGIN_NS = 150_000  # the kernel spins only this long before a start (sleeps before)
LATE_LIMIT = 0.05          # a group with more late trials than this is measured again ...
GAP_GROWTH = 4             # ... with this many times the gap ...
RETRIES = 2                # ... at most this many times


class Progress:
    """A progress line on rank 0's stderr: redrawn with ``\\r`` on a terminal, else one per step."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled = total, 0, enabled
        self.tty = enabled and sys.stderr.isatty()

    def step(self, label):
        """Count one step done and show ``label``."""
        self.done += 1
        if not self.enabled:
            return
        width = 24
        fill = width * self.done // max(self.total, 1)
        line = f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {label}"
        if self.tty:
            sys.stderr.write(f"\r{line:<100}" + ("\n" if self.done >= self.total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _agree_gap(backend, op, now, min_gap):
    """Run ``WARMUP`` untimed operations; return the trial gap every rank agrees on (ns)."""
    durations = []
    backend.comm.Barrier()
    if op is not None:
        for _ in range(WARMUP):
            t0 = now()
            op(t0, now)
            durations.append(now() - t0)
    longest = max(backend.comm.allgather(float(np.median(durations)) if durations else 0.0))
    return int(max(min_gap, 3 * longest + 100_000))


def _trials(clock, op, start, gap, trials, sleep_margin, yield_cpu):
    """Run ``trials`` trials of ``op`` from global time ``start``; return this rank's samples."""
    samples = {}
    if op is None:
        clock.spin_until(start + trials * gap, sleep_margin, yield_cpu)
        return samples
    for k in range(trials):
        target = start + k * gap
        _, late = clock.spin_until(target, sleep_margin, yield_cpu)
        for what, t in op(target, clock.now):
            trial_list, t_list, late_list = samples.setdefault(what, ([], [], []))
            trial_list.append(k)
            t_list.append(float(t))
            late_list.append(bool(late))
    return samples


def measure_group(backend, clock, op, trials, min_gap=MIN_GAP_NS,
                  sleep_margin=SLEEP_MARGIN_NS, yield_cpu=True):
    """Time ``trials`` trials of ``op`` at agreed global start times; return this rank's samples.

    Every rank of the job calls this (ranks that sit out pass ``op=None`` and sleep through
    the schedule). When more than :data:`LATE_LIMIT` of the trials started late on some rank
    (an operation overran the gap), the group is measured again with ``GAP_GROWTH`` times the
    gap, at most :data:`RETRIES` times. Returns ``(gap_ns, {what: ([trial], [t_ns], [late])})``.
    """
    gap = _agree_gap(backend, op, clock.now, min_gap)
    for attempt in range(RETRIES + 1):
        sched = np.array([clock.now() + LEAD_NS if backend.rank == 0 else 0], dtype=np.int64)
        backend.comm.Bcast(sched, root=0)
        samples = _trials(clock, op, int(sched[0]), gap, trials, sleep_margin, yield_cpu)
        late = sum(sum(lates) for _, _, lates in samples.values())
        total = sum(len(lates) for _, _, lates in samples.values())
        worst = max(backend.comm.allgather(late / total if total else 0.0))
        if worst <= LATE_LIMIT or attempt == RETRIES:
            return gap, samples
        gap *= GAP_GROWTH


def _collect(backend, key, gap, samples):
    """Gather every rank's samples of one group at rank 0; return the groups (rank 0) or []."""
    gathered = backend.comm.gather(samples, root=0)
    if backend.rank != 0:
        return []
    pattern, cls, size = key
    groups = {}
    for rank, per_rank in enumerate(gathered):
        for what, (trials, times, lates) in per_rank.items():
            g = groups.setdefault(what, {"pattern": pattern, "class": cls, "size": size,
                                         "what": what, "gap_ns": gap, "rank": [],
                                         "trial": [], "t_ns": [], "late": []})
            g["rank"] += [rank] * len(trials)
            g["trial"] += trials
            g["t_ns"] += times
            g["late"] += lates
    return [groups[w] for w in sorted(groups)]


def _calibrate(backend, quick):
    """Calibrate the clock (and apply the test hook first); return (calibration, clock)."""
    gclock.apply_test_skew(backend.rank)
    exchanges = gclock.QUICK_EXCHANGES if quick else gclock.EXCHANGES
    cal = gclock.calibrate(backend, exchanges, interval=0.3 if quick else 1.0)
    return cal, cal.clock()


def _clock_meta(backend, cal, clock, quick):
    """Measure the residual at the end of the run; return the clock part of ``meta`` (rank 0)."""
    exchanges = gclock.QUICK_EXCHANGES if quick else gclock.EXCHANGES
    res, res_bound = gclock.residual(backend, clock, exchanges)
    mine = {**cal.as_dict(), "residual_ns": res, "residual_bound_ns": res_bound,
            "accuracy_ns": gclock.accuracy(cal, res, res_bound),
            "truth_ns": gclock.truth_offset_ns(clock)}
    ranks = backend.comm.gather(mine, root=0)
    if backend.rank != 0:
        return None
    return {"local_clock": gclock._timing.LOCAL_CLOCK, "ranks": ranks,
            "accuracy_ns": max(r["accuracy_ns"] for r in ranks),
            "max_residual_ns": max(abs(r["residual_ns"]) for r in ranks)}


def run(args):
    """Run the benchmark on this rank; rank 0 writes the outputs and prints the table."""
    backend = open_backend(args.backend)
    chosen = patterns.by_name(args.patterns) if args.patterns else patterns.PATTERNS
    cal, clock = _calibrate(backend, args.quick)
    plan = [(p, cls, pairs, size)
            for p in chosen for cls, pairs in p.groups(backend)
            for size in patterns.sizes_for(p, args.quick, args.sizes)]
    progress = Progress(len(plan), backend.rank == 0 and not args.no_progress)
    groups, started = [], time.time()
    for p, cls, pairs, size in plan:
        op = p.make(backend, size, pairs)
        n = patterns.trials_for(size, args.quick, args.trials)
        gap, samples = measure_group(backend, clock, op, n, min_gap=args.min_gap_us * 1000,
                                     yield_cpu=not args.no_yield)
        groups += _collect(backend, (p.name, cls, size), gap, samples)
        progress.step(f"{p.name} {cls} {report.size_text(size)}: {n} trials, "
                      f"gap {gap / 1e3:.0f} µs")
    clock_meta = _clock_meta(backend, cal, clock, args.quick)
    if backend.rank != 0:
        return 0
    results = {
        "meta": {"backend": backend.name, "library": backend.library, "size": backend.size,
                 "locations": backend.locations, "command": " ".join(sys.argv),
                 "quick": args.quick, "cpus": os.cpu_count(),
                 "affinity": sorted(os.sched_getaffinity(0)),
                 "started": datetime.datetime.fromtimestamp(
                     started, datetime.timezone.utc).isoformat(timespec="seconds"),
                 "seconds": round(time.time() - started, 1), "clock": clock_meta},
        "groups": groups,
        "stats": report.all_stats(groups),
    }
    print(report.write(results, args.out), flush=True)
    from coc.bench import plots
    plotted = not args.no_plots and plots.available()
    if plotted:
        plots.plot_run(results, args.out)
    elif not args.no_plots:
        print(f"coc bench run: {plots.SKIPPED}", file=sys.stderr, flush=True)
    print(f"\nwritten to {args.out}/ (results.json, samples.csv, table.txt"
          f"{', *.png' if plotted else ''})", flush=True)
    return 0


def _sizes(text):
    """Parse ``--sizes 8,4096,1048576``."""
    try:
        sizes = [int(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"bad --sizes {text!r}: expected N,N,... bytes") from None
    if any(v < 0 for v in sizes):
        raise ValueError("sizes must not be negative")
    return sizes


def _pattern(name):
    """Check one pattern name of the command line."""
    try:
        return patterns.by_name([name])[0].name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p):
    """Add the options of ``coc bench run`` to parser ``p``."""
    names = ", ".join(x.name for x in patterns.PATTERNS)
    p.add_argument("patterns", nargs="*", metavar="PATTERN", type=_pattern,
                   help=f"patterns to run (default: all): {names}")
    p.add_argument("--sizes", type=_sizes, metavar="N,N,...",
                   help="message sizes in bytes for the sized patterns")
    p.add_argument("--trials", type=int, metavar="N",
                   help="trials per size (default 300, 40 with --quick; fewer for large sizes)")
    p.add_argument("--quick", action="store_true", help="few sizes and trials (CI)")
    p.add_argument("--out", default="bench-results", metavar="DIR",
                   help="directory for results.json, samples.csv, table.txt and the plots")
    p.add_argument("--backend", choices=["auto", "coc", "mpi4py"], default="auto",
                   help="communicator to measure (auto: coc under coc-run, mpi4py under an "
                        "MPI launcher)")
    p.add_argument("--min-gap-us", type=int, default=MIN_GAP_NS // 1000, metavar="US",
                   help="least time between trial starts")
    p.add_argument("--no-yield", action="store_true",
                   help="spin without sched_yield() before a trial (better only when every "
                        "rank has a core of its own)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")


def register(patterns_parsers):
    """Add ``coc bench run`` to the ``coc bench`` sub-commands."""
    p = add_pattern(patterns_parsers, "run", "MPIBench-style distributions on every rank (run "
                    "under coc-run or mpiexec)", __doc__, main)
    add_arguments(p)


def main(args):
    """Run ``coc bench run`` with errors reported as one line, not a traceback."""
    try:
        return run(args)
    except CocError as exc:
        print(f"coc bench run: {exc}", file=sys.stderr)
        return 2
