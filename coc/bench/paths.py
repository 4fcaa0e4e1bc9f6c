"""The three contenders of a reproduction, each run on a testbed and summarised alike.

- :func:`coc_job`: ``coc bench run`` under ``coc-run --testbed`` (coc's gateways on the
  routes the topology gives, emulated latencies as engine delays);
- :func:`mpich_job`: the same benchmark under MPICH's ``mpiexec`` with every rank in its
  host's namespace (:mod:`coc.bench.netns_mpi`; flat topologies only);
- :func:`chain_pingpong`: the C ping-pong through two user-level relays
  (:mod:`coc.bench.chain`, PACX-MPI's shape).

Every result becomes rows ``{size, median, p10, p90, p99, n}`` in µs, so plots and tables
treat the three alike; the C tool reports only the median and p99 of its round trips.
"""

import os
import subprocess
import sys

import numpy as np

from coc.bench import chain, engine, netns_mpi, report
from coc.errors import CocError
from coc.pycommand import python_argv

__all__ = ["summary", "coc_job", "mpich_job", "chain_pingpong"]

BENCH = python_argv("coc.bench", "run")
JOB_TIMEOUT = 1800.0


def summary(results, pattern, what, cls=None):
    """Return ``{size: row}`` of one pattern's samples (late trials left out), µs."""
    out = {}
    for g in results["groups"]:
        if g["pattern"] != pattern or g["what"] != what or (cls and g["class"] != cls):
            continue
        t = np.array([t for t, late in zip(g["t_ns"], g["late"]) if not late]) / 1e3
        if t.size:
            p10, median, p90, p99 = np.percentile(t, [10, 50, 90, 99])
            out[g["size"]] = {"size": g["size"], "median": float(median), "p10": float(p10),
                              "p90": float(p90), "p99": float(p99), "n": int(t.size),
                              "samples": t.tolist()}
    return out


def _bench_args(patterns, sizes, trials, out, quick):
    return [*BENCH, *patterns, "--sizes", ",".join(map(str, sizes)),
            *(["--trials", str(trials)] if trials else []), *(["--quick"] if quick else []),
            "--out", str(out), "--no-plots", "--no-progress"]


def _run(title, argv, out, timeout, env=None):
    """Run one benchmark job; return its results (CocError naming the job when it fails)."""
    print(f"== {title}", file=sys.stderr, flush=True)
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise CocError(f"{title}: {' '.join(argv)} exited with {proc.returncode}:\n"
                       f"{proc.stderr.strip()[-1500:]}")
    return report.load(out)


def coc_job(bed, hosts, patterns, sizes, out, *, trials=None, quick=False, delays=(),
            timeout=JOB_TIMEOUT):
    """Run ``coc bench run`` with one rank on each of ``hosts`` of testbed ``bed``.

    ``delays`` are ``coc-run --delay`` values (``NETWORK=TIME``). Returns the results.
    """
    argv = [*python_argv("coc.launcher.cli"), "--testbed", bed.name,
            *(a for h in hosts for a in ("--host", f"{h}:1")), "-n", str(len(hosts)),
            *(a for d in delays for a in ("--delay", d)),
            *_bench_args(patterns, sizes, trials, out, quick)]
    return _run(f"coc on {bed.name}: {len(hosts)} ranks"
                f"{', ' + ' '.join(delays) if delays else ''}", argv, out, timeout)


def mpich_job(bed, placement, patterns, sizes, out, *, trials=None, quick=False,
              timeout=JOB_TIMEOUT):
    """Run ``coc bench run`` under MPICH, ranks in their hosts' namespaces.

    ``placement`` is ``[(site, host, networks)]`` (:func:`coc.bench.netns_mpi.rank_spec`).
    """
    argv = netns_mpi.mpiexec_argv(bed, placement,
                                  _bench_args(patterns, sizes, trials, out, quick))
    return _run(f"MPICH on {bed.name}: {len(placement)} ranks", argv, out, timeout)


def chain_pingpong(bed, hops, sizes, *, quick=False, iterations=None, delay_us=0):
    """Run the two-relay ping-pong; return ``{size: row}`` (median and p99 only, µs)."""
    print(f"== 2 relays on {bed.name}: {hops.client} -> "
          f"{' -> '.join(h.host for h in hops.relays)} -> {hops.echo.host}"
          f"{f', {delay_us} us each way' if delay_us else ''}", file=sys.stderr, flush=True)
    specs = [[s, iterations or engine.iterations(s, quick)] for s in sizes]
    rows = chain.run_chain(bed, hops, specs, delay_us=delay_us,
                           timeout=engine.TIMEOUT + 4 * delay_us / 1e6 * specs[0][1])
    return {r["size"]: {"size": r["size"], "median": r["median_ns"] / 1e3, "p10": None,
                        "p90": None, "p99": r["p99_ns"] / 1e3, "n": r["iters"]} for r in rows}
