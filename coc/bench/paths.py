"""The three contenders of a reproduction, each run on a testbed and summarised alike.

- :func:`coc_job`: a benchmark program under ``coc-run --testbed`` (coc's gateways on the
  routes the topology gives, emulated latencies as engine delays);
- :func:`mpich_job`: the same program under MPICH's ``mpiexec`` with every rank in its
  host's namespace (:mod:`coc.bench.netns_mpi`; flat topologies only);
- :func:`chain_pingpong`: the C ping-pong through two user-level relays
  (:mod:`coc.bench.chain`, PACX-MPI's shape).

The program is :func:`bench_run` (``coc bench run``: MPIBench's distributions) or
:func:`pingpong_run` (:mod:`coc.bench.pingpong`: PMB's back-to-back ping-pong).
Every result becomes rows ``{size, median, p10, p90, p99, n}`` in µs, so plots and tables
treat the three alike; the C tool reports only the median and p99 of its round trips.
"""

import json
import os
import subprocess
import sys

import numpy as np

from coc.bench import chain, engine, netns_mpi, report
from coc.errors import CocError
from coc.pycommand import python_argv

__all__ = ["summary", "rows", "bench_run", "pingpong_run", "coc_job", "mpich_job",
           "chain_pingpong"]

BENCH = python_argv("coc.bench", "run")
JOB_TIMEOUT = 1800.0
PIN = ("taskset", "-c", "0")
# docs/engine.md: waits that never spin suit processes sharing one CPU.
PIN_ENV = {"COC_SPIN_NS": "-1"}


def rows(samples_by_size):
    """Return ``{size: row}`` from ``{size: [µs, ...]}`` (sizes without samples left out)."""
    out = {}
    for size, t in samples_by_size.items():
        t = np.asarray(t, dtype=np.float64)
        if t.size:
            p10, median, p90, p99 = np.percentile(t, [10, 50, 90, 99])
            out[size] = {"size": size, "median": float(median), "p10": float(p10),
                         "p90": float(p90), "p99": float(p99), "n": int(t.size),
                         "samples": t.tolist()}
    return out


def summary(results, pattern, what, cls=None):
    """Return ``{size: row}`` of one pattern of ``coc bench run`` results (late trials out)."""
    return rows({g["size"]: [t / 1e3 for t, late in zip(g["t_ns"], g["late"]) if not late]
                 for g in results["groups"]
                 if g["pattern"] == pattern and g["what"] == what
                 and (not cls or g["class"] == cls)})


def bench_run(patterns, sizes, out, *, trials=None, quick=False):
    """Return ``(argv, load)``: ``coc bench run`` writing to directory ``out``."""
    argv = [*BENCH, *patterns, "--sizes", ",".join(map(str, sizes)),
            *(["--trials", str(trials)] if trials else []), *(["--quick"] if quick else []),
            "--out", str(out), "--no-plots", "--no-progress"]
    return argv, lambda: report.load(out)


def pingpong_run(sizes, out, *, iterations=None, quick=False):
    """Return ``(argv, load)``: the back-to-back ping-pong writing JSON file ``out``;
    ``load()`` gives ``{size: row}``."""
    argv = python_argv("coc.bench.pingpong", "--sizes", ",".join(map(str, sizes)),
                       *(["--iterations", str(iterations)] if iterations else []),
                       *(["--quick"] if quick else []), "--out", str(out))

    def load():
        with open(out) as f:
            return rows({r["size"]: r["samples"] for r in json.load(f)["rows"]})
    return argv, load


def _run(title, argv, load, timeout, pin):
    """Run one benchmark job; return ``load()`` (CocError naming the job when it fails).

    ``pin`` runs it and everything it starts on CPU 0 (no cross-CPU wake-ups).
    """
    print(f"== {title}{' (pinned)' if pin else ''}", file=sys.stderr, flush=True)
    proc = subprocess.run([*(PIN if pin else ()), *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env={**os.environ, **(PIN_ENV if pin else {})})
    if proc.returncode != 0:
        raise CocError(f"{title}: {' '.join(argv)} exited with {proc.returncode}:\n"
                       f"{proc.stderr.strip()[-1500:]}")
    return load()


def coc_job(bed, hosts, program, *, delays=(), pin=False, timeout=JOB_TIMEOUT):
    """Run ``program`` (``(argv, load)``) with one rank on each of ``hosts`` of testbed ``bed``.

    ``delays`` are ``coc-run --delay`` values (``NETWORK=TIME``). Returns ``load()``.
    """
    argv, load = program
    argv = [*python_argv("coc.launcher.cli"), "--testbed", bed.name,
            *(a for h in hosts for a in ("--host", f"{h}:1")), "-n", str(len(hosts)),
            *(a for d in delays for a in ("--delay", d)), *argv]
    return _run(f"coc on {bed.name}: {len(hosts)} ranks"
                f"{', ' + ' '.join(delays) if delays else ''}", argv, load, timeout, pin)


def mpich_job(bed, placement, program, *, pin=False, timeout=JOB_TIMEOUT):
    """Run ``program`` under MPICH, ranks in their hosts' namespaces; return ``load()``.

    ``placement`` is ``[(site, host, networks)]`` (:func:`coc.bench.netns_mpi.rank_spec`).
    """
    argv, load = program
    return _run(f"MPICH on {bed.name}: {len(placement)} ranks",
                netns_mpi.mpiexec_argv(bed, placement, argv), load, timeout, pin)


def chain_pingpong(bed, hops, sizes, *, quick=False, iterations=None, delay_us=0, pin=False):
    """Run the two-relay ping-pong; return ``{size: row}`` (median and p99 only, µs)."""
    print(f"== 2 relays on {bed.name}: {hops.client} -> "
          f"{' -> '.join(h.host for h in hops.relays)} -> {hops.echo.host}"
          f"{f', {delay_us} us each way' if delay_us else ''}", file=sys.stderr, flush=True)
    specs = [[s, iterations or engine.iterations(s, quick)] for s in sizes]
    rows = chain.run_chain(bed, hops, specs, delay_us=delay_us, prefix=PIN if pin else (),
                           timeout=engine.TIMEOUT + 4 * delay_us / 1e6 * specs[0][1])
    return {r["size"]: {"size": r["size"], "median": r["median_ns"] / 1e3, "p10": None,
                        "p90": None, "p99": r["p99_ns"] / 1e3, "n": r["iters"]} for r in rows}
