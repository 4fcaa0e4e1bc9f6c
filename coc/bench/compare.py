"""``coc bench report``: coc, plain mpi4py + MPICH and a two-relay chain, measured in one go.

Runs ``coc bench run`` three times — under ``coc-run`` on the two-sites topology (one pair
of ranks within a host, one within a site, one across sites), under MPICH's ``mpiexec``
with shared memory, and under ``mpiexec`` with MPICH forced onto TCP (``MPIR_CVAR_NOLOCAL``,
the OFI tcp provider on loopback) — then times the C references of ``coc bench engine``
(direct TCP, and two chained ``coc_relay`` processes: PACX-MPI's shape) at the same sizes,
and writes ``report.md`` with ratios and comparison plots beside each run's own outputs.
"""

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from coc.bench import engine, patterns, plots, report
from coc.bench.backend import CLASSES
from coc.bench.cli import add_pattern
from coc.bench.plots import CLASS_TITLE, curve_points, plot_compare
from coc.errors import CocError
from coc.pycommand import python_argv

__all__ = ["RUNS", "REFERENCES", "run_jobs", "reference_points", "pingpong_columns", "ratios",
           "format_report", "register"]

BENCH = python_argv("coc.bench", "run")
# One pair of each class on two-sites: ranks 0,1 on a1, 2 on a2, 3 on b1.
COC_PLACEMENT = ["--host", "a1", "--host", "a2:1", "--host", "b1:1", "-n", "4"]
MPICH_TCP_ENV = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi",
                 "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}

# (key, title, launcher argv before the program, extra environment)
RUNS = [
    ("coc", "coc, coc-run on two-sites", [*python_argv("coc.launcher.cli"),
                                          *COC_PLACEMENT], {}),
    ("mpich-shm", "mpi4py + MPICH, shared memory", ["mpiexec", "-n", "4"], {}),
    ("mpich-tcp", "mpi4py + MPICH over TCP (loopback)", ["mpiexec", "-n", "4"], MPICH_TCP_ENV),
]
# (key, title, relays) of the C ping-pong references (coc bench engine's tools).
REFERENCES = [("tcp", "C ping-pong, direct TCP", 0), ("relay2", "C ping-pong, 2 relays", 2)]

COLLECTIVES = ("Barrier", "Bcast", "Allreduce", "Alltoall")


def _job(title, argv, env, out, timeout):
    """Run one ``coc bench run`` job writing to ``out``; return its results."""
    print(f"== {title}", file=sys.stderr, flush=True)
    argv = [*argv, "--out", str(out), "--no-plots"]
    proc = subprocess.run(argv, env={**os.environ, **env}, timeout=timeout,
                          stdout=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise CocError(f"{title}: {' '.join(argv)} exited with {proc.returncode}")
    return report.load(out)


def run_jobs(out, quick, prefix=(), repeat=1, testbed=None, timeout=900):
    """Run ``coc bench run`` under each launcher of :data:`RUNS`; return ``{key: results}``.

    With ``repeat`` > 1 the jobs run that many times, interleaved (so a change in the
    machine's load hits every job alike), each into ``KEY/repN/``, and their samples are
    pooled into ``KEY/``. ``testbed`` names a testbed (``coc testbed up two-sites``) whose
    network namespaces the coc job runs in (``coc-run --testbed``).
    """
    if shutil.which("mpiexec") is None:
        raise CocError("coc bench report needs MPICH's mpiexec and mpi4py "
                       "(pip install mpich mpi4py)")
    runs = {key: [] for key, *_ in RUNS}
    for rep in range(repeat):
        for key, title, launcher, env in RUNS:
            if key == "coc":
                if testbed:
                    launcher = [*launcher[:3], "--testbed", testbed, *launcher[3:]]
                    title = f"{title} testbed (network namespaces)"
                if prefix:
                    # docs/engine.md: waits that never spin suit processes sharing one CPU.
                    env = {"COC_SPIN_NS": os.environ.get("COC_SPIN_NS", "-1"), **env}
            argv = [*prefix, *launcher, *BENCH, *(["--quick"] if quick else [])]
            where = out / key / f"rep{rep + 1}" if repeat > 1 else out / key
            res = _job(f"{title} ({rep + 1}/{repeat})", argv, env, where, timeout)
            res["meta"]["title"] = title
            runs[key].append(res)
    results = {key: report.merge(r) if repeat > 1 else r[0] for key, r in runs.items()}
    if repeat > 1:
        for key, res in results.items():
            report.write(res, out / key)
    return results


def reference_points(quick, prefix=()):
    """Time the C references at the PingPong sizes; return ``{key: [(size, p50, p50, p99)]}``.

    The tools report the median and p99 of half round trips (µs here, like
    :func:`~coc.bench.plots.curve_points`).
    """
    sizes = patterns.sizes_for(patterns.by_name(["PingPong"])[0], quick)
    specs = [[s, engine.iterations(s, quick)] for s in sizes]
    out = {}
    for key, title, relays in REFERENCES:
        print(f"== {title}", file=sys.stderr, flush=True)
        rows = engine.run_tcp(relays, specs, prefix=prefix, sockbuf=engine.SOCKBUF)
        out[key] = [(r["size"], r["median_ns"] / 1e3, r["median_ns"] / 1e3, r["p99_ns"] / 1e3)
                    for r in rows]
    return out


def _stat(results, pattern, cls, what, size, column="median"):
    """Return one statistic (µs) of one run, or None when the run has no such group."""
    for s in results["stats"]:
        if (s["pattern"], s["what"], s["size"]) == (pattern, what, size) and (
                cls is None or s["class"] == cls) and s["n"]:
            return s[column] / 1e3
    return None


def _ref(points, size, column="median"):
    """Return a reference's median or p99 (µs) at ``size``, or None."""
    row = next((p for p in points if p[0] == size), None)
    return None if row is None else row[2 if column == "median" else 3]


def pingpong_columns(results, refs):
    """Return ``[(title, f(size, column) -> µs or None)]``: every PingPong path, coc first."""
    present = {s["class"] for s in results["coc"]["stats"] if s["pattern"] == "PingPong"}
    coc_classes = [c for c in CLASSES if c in present]
    cols = [(f"coc {CLASS_TITLE[c]}", functools.partial(_stat, results["coc"], "PingPong", c,
                                                         "half-rtt")) for c in coc_classes]
    cols += [(title, functools.partial(_stat, results[key], "PingPong", None, "half-rtt"))
             for key, title, _, _ in RUNS[1:]]
    cols += [(title, functools.partial(_ref, refs[key])) for key, title, _ in REFERENCES]
    return cols


def _cell(value, fmt="{:.1f}"):
    return "–" if value is None else fmt.format(value)


def _ratio(a, b):
    return None if a is None or not b else a / b


def ratios(results, refs):
    """Return ``[(reference, [(label, ratio)])]``: coc across sites over every other path.

    Ratios of the median and the p99 of PingPong half round trips at the smallest and the
    largest size of the sweep; below 1, coc is faster.
    """
    cols = pingpong_columns(results, refs)
    sizes = patterns.sizes_for(patterns.by_name(["PingPong"])[0], results["coc"]["meta"]["quick"])
    coc = dict(cols).get(f"coc {CLASS_TITLE['wan']}")
    if coc is None:
        return []
    rows = []
    for title, f in cols:
        if title == f"coc {CLASS_TITLE['wan']}":
            continue
        rows.append((title, [(f"{report.size_text(size)} {column}",
                              _ratio(coc(size, column), f(size, column)))
                             for size in (sizes[0], sizes[-1]) for column in ("median", "p99")]))
    return rows


def format_report(results, refs, command):
    """Return report.md: how it was made, each run's clock, PingPong, ratios, collectives."""
    lines = ["# coc bench report", "", f"Command: `{command}`", ""]
    for key, title, _, _ in RUNS:
        meta = results[key]["meta"]
        repeats = meta.get("repeats", 1)
        lines.append(f"- **{meta.get('title', title)}** ({meta['library']}): {meta['size']} "
                     f"ranks, {f'{repeats} runs pooled, ' if repeats > 1 else ''}"
                     f"{meta['seconds']} s, global clock accuracy "
                     f"±{meta['clock']['accuracy_ns'] / 1e3:.1f} µs; outputs in `{key}/`")
    cols = pingpong_columns(results, refs)
    sizes = patterns.sizes_for(patterns.by_name(["PingPong"])[0], results["coc"]["meta"]["quick"])
    lines += ["", "## PingPong, half round trip: median / p99 (µs)", "",
              "| size | " + " | ".join(t for t, _ in cols) + " |",
              "|---:|" + "---:|" * len(cols)]
    for size in sizes:
        lines.append(f"| {report.size_text(size)} | " + " | ".join(
            f"{_cell(f(size, 'median'))} / {_cell(f(size, 'p99'), '{:.0f}')}"
            for _, f in cols) + " |")
    table = ratios(results, refs)
    if table:
        lines += ["", "## coc across sites (two gateways) / each other path (below 1: coc "
                  "faster)", "", "| against | " + " | ".join(l for l, _ in table[0][1]) + " |",
                  "|---|" + "---:|" * len(table[0][1])]
        lines += [f"| {title} | " + " | ".join(_cell(v, "{:.2f}") for _, v in row) + " |"
                  for title, row in table]
    lines += ["", "## Collectives, 4 ranks, smallest size: every rank's completion, "
              "median / p99 (µs)", "", "| pattern | " + " | ".join(t for _, t, _, _ in RUNS)
              + " | coc / MPICH shm (median) | coc / MPICH TCP (median) |",
              "|---|" + "---:|" * (len(RUNS) + 2)]
    for pattern in COLLECTIVES:
        size = patterns.sizes_for(patterns.by_name([pattern])[0],
                                  results["coc"]["meta"]["quick"])[0]
        med = [_stat(results[k], pattern, None, "completion", size) for k, *_ in RUNS]
        p99 = [_stat(results[k], pattern, None, "completion", size, "p99") for k, *_ in RUNS]
        lines.append(f"| {pattern} {report.size_text(size)} | " + " | ".join(
            f"{_cell(m)} / {_cell(p, '{:.0f}')}" for m, p in zip(med, p99)) + " | "
            + " | ".join(_cell(_ratio(med[0], m), "{:.2f}") for m in med[1:]) + " |")
    return "\n".join(lines) + "\n"


def _pingpong_groups(results, cls=None):
    return [g for g in results["groups"] if g["pattern"] == "PingPong"
            and (cls is None or g["class"] == cls)]


def _plot_pingpong(results, refs, path):
    colors = {"host": "tab:green", "site": "tab:blue", "wan": "tab:red"}
    series = [(f"coc {CLASS_TITLE[cls]}", curve_points(_pingpong_groups(results["coc"], cls),
                                                       "half-rtt"), colors[cls], "-")
              for cls in ("host", "site", "wan")]
    series += [(title, curve_points(_pingpong_groups(results[key]), "half-rtt"), color, "--")
               for (key, title, _, _), color in zip(RUNS[1:], ("tab:purple", "tab:brown"))]
    series += [(title, [(size, med, med, med) for size, _, med, _ in refs[key]], color, ":")
               for (key, title, _), color in zip(REFERENCES, ("tab:gray", "black"))]
    return plot_compare(series, path, "PingPong half round trip: coc by class vs MPICH "
                                      "(median, p10–p90 band) and C references (median)")


def _plot_collectives(results, path):
    """Box plot (p1–p99 whiskers) of 8-byte collective completions, coc vs MPICH."""
    plt = plots.pyplot()
    fig, axes = plt.subplots(1, len(COLLECTIVES), figsize=(3.0 * len(COLLECTIVES), 3.4))
    for ax, pattern in zip(axes, COLLECTIVES):
        data, labels = [], []
        for key, title, _, _ in RUNS:
            groups = [g for g in results[key]["groups"] if g["pattern"] == pattern]
            if not groups:
                continue
            g = min(groups, key=lambda g: g["size"])
            data.append([t / 1e3 for t, late in zip(g["t_ns"], g["late"]) if not late])
            labels.append(key)
        ax.boxplot(data, whis=(1, 99), showfliers=True, flierprops={"markersize": 2})
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
        ax.set_yscale("log")
        plots.log_axis(ax.yaxis)
        ax.set_title(f"{pattern} {report.size_text(g['size'])}", fontsize=9)
        ax.set_ylabel("completion per rank (µs)", fontsize=8)
    fig.suptitle("Collectives, 4 ranks: every rank's completion (box p25–p75, whiskers "
                 "p1–p99)", fontsize=10)
    return plots.save(plt, fig, Path(path))


def _report(args):
    """Run ``coc bench report``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = ("taskset", "-c", "0") if args.pin else ()
    try:
        results = run_jobs(out, args.quick, prefix, args.repeat, args.testbed)
        refs = reference_points(args.quick, prefix)
    except (CocError, subprocess.TimeoutExpired) as exc:
        print(f"coc bench report: {exc}", file=sys.stderr)
        return 1
    if plots.available():
        for key, *_ in RUNS:
            plots.plot_run(results[key], out / key)
        _plot_pingpong(results, refs, out / "compare-pingpong.png")
        _plot_collectives(results, out / "compare-collectives.png")
    else:
        print(f"coc bench report: {plots.SKIPPED}", file=sys.stderr, flush=True)
    command = " ".join(["coc bench report", *(["--quick"] if args.quick else []),
                        *(["--pin"] if args.pin else []),
                        *([f"--repeat {args.repeat}"] if args.repeat > 1 else []),
                        *([f"--testbed {args.testbed}"] if args.testbed else []),
                        "--out", str(out)])
    text = format_report(results, refs, command)
    (out / "report.md").write_text(text)
    print(text)
    print(f"written to {out}/ (report.md, compare-*.png, and each run's outputs)")
    return 0


def register(patterns_parsers):
    """Add ``coc bench report`` to the ``coc bench`` sub-commands."""
    p = add_pattern(patterns_parsers, "report", "run coc, mpi4py + MPICH and a two-relay "
                    "chain; write report and plots", __doc__, _report)
    p.add_argument("--quick", action="store_true", help="few sizes and trials")
    p.add_argument("--out", default="bench-report", metavar="DIR", help="output directory")
    p.add_argument("--pin", action="store_true",
                   help="run everything with taskset -c 0 (one CPU: no cross-CPU wake-ups)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run every job N times, interleaved, and pool their samples")
    p.add_argument("--testbed", metavar="NAME",
                   help="run the coc job on this testbed's network namespaces "
                        "(coc testbed up two-sites --name NAME; needs root)")
