"""Write and read a run's results: the IMB-style table, results.json and samples.csv.

A run's results are one dict: ``meta`` (backend, ranks and where they ran, the clock
calibration), ``groups`` (every sample: one entry per pattern, class, size and kind of
time, with parallel lists ``rank``, ``trial``, ``t_ns``, ``late``) and ``stats`` (the
summary of each group, late trials left out).
"""

import csv
import json
from pathlib import Path

from coc.bench.patterns import PATTERNS
from coc.bench.stats import QUANTILES, bandwidth_mbs, summarize

__all__ = ["group_stats", "all_stats", "merge", "format_table", "format_clock", "write", "load",
           "CSV_FIELDS", "size_text"]

CSV_FIELDS = ("pattern", "class", "size", "what", "rank", "trial", "t_ns", "late")


def size_text(size):
    """Return a size as IMB prints it, in bytes, KiB or MiB.

    Examples
    --------
    >>> size_text(8), size_text(4096), size_text(4 << 20), size_text(1000)
    ('8 B', '4 KiB', '4 MiB', '1000 B')
    """
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def group_stats(group, bandwidth):
    """Return the summary row of one group of samples (late trials left out)."""
    kept = [t for t, late in zip(group["t_ns"], group["late"]) if not late]
    row = {k: group[k] for k in ("pattern", "class", "size", "what")}
    row["late"] = len(group["t_ns"]) - len(kept)
    row.update(summarize(kept))
    row["mbs"] = bandwidth_mbs(group["size"], row["median"]) if bandwidth else None
    return row


def all_stats(groups):
    """Return the summary rows of ``groups``, with bandwidth for the patterns that have one."""
    bandwidth = {p.name: p.bandwidth for p in PATTERNS}
    return [group_stats(g, bandwidth[g["pattern"]]) for g in groups]


def merge(runs):
    """Pool the samples of repeated runs of one job into one results dict.

    Trials of later runs are numbered on after the earlier ones' and the statistics are
    computed over all of them; ``meta`` is the first run's, with ``repeats``, the total
    ``seconds`` and the clock of the run with the worst accuracy.
    """
    merged = {}
    for res in runs:
        for g in res["groups"]:
            key = (g["pattern"], g["class"], g["size"], g["what"])
            m = merged.setdefault(key, {**g, "rank": [], "trial": [], "t_ns": [], "late": []})
            first = max(m["trial"], default=-1) + 1
            m["rank"] += g["rank"]
            m["trial"] += [t + first for t in g["trial"]]
            m["t_ns"] += g["t_ns"]
            m["late"] += g["late"]
            m["gap_ns"] = max(m["gap_ns"], g["gap_ns"])
    meta = {**runs[0]["meta"], "repeats": len(runs),
            "seconds": round(sum(r["meta"]["seconds"] for r in runs), 1),
            "clock": max((r["meta"]["clock"] for r in runs), key=lambda c: c["accuracy_ns"])}
    groups = list(merged.values())
    return {"meta": meta, "groups": groups, "stats": all_stats(groups)}


def format_table(stats):
    """Return the IMB-style table: one block per pattern, times in microseconds."""
    names = [name for name, _ in QUANTILES]
    head = (f"{'class':<6}{'time':<11}{'bytes':>8}{'n':>6}{'late':>5}"
            + "".join(f"{n:>10}" for n in names) + f"{'MB/s':>10}")
    lines, pattern = [], None
    for row in stats:
        if row["pattern"] != pattern:
            pattern = row["pattern"]
            lines += ["", f"# {pattern}  (µs; MB/s = size / median)", head]
        cells = "".join(f"{row[n] / 1e3:>10.1f}" if row["n"] else f"{'-':>10}" for n in names)
        mbs = f"{row['mbs']:>10.0f}" if row["mbs"] is not None and row["n"] else f"{'':>10}"
        lines.append(f"{row['class']:<6}{row['what']:<11}{size_text(row['size']):>8}"
                     f"{row['n']:>6}{row['late']:>5}{cells}{mbs}")
    return "\n".join(lines[1:])


def format_clock(meta):
    """Return the clock summary: each rank's offset, drift, bound and end-of-run residual."""
    clock = meta["clock"]
    lines = [f"global clock: {clock['local_clock']} mapped onto rank 0's; "
             f"accuracy ±{clock['accuracy_ns'] / 1e3:.1f} µs over the run "
             f"(largest residual at the end {clock['max_residual_ns'] / 1e3:.1f} µs)",
             f"{'rank':>5}{'offset (µs)':>16}{'drift (ppm)':>13}{'applied':>9}"
             f"{'bound (µs)':>12}{'residual (µs)':>16}{'accuracy (µs)':>15}"]
    for r, c in enumerate(clock["ranks"]):
        lines.append(f"{r:>5}{c['offset_ns'] / 1e3:>16.1f}{c['drift'] * 1e6:>13.2f}"
                     f"{'yes' if c['drift_applied'] else 'no':>9}"
                     f"{c['bound_ns'] / 1e3:>12.1f}"
                     f"{c['residual_ns'] / 1e3:>9.1f} ±{c['residual_bound_ns'] / 1e3:<5.1f}"
                     f"{c['accuracy_ns'] / 1e3:>15.1f}")
    return "\n".join(lines)


def write(results, out):
    """Write ``results.json``, ``samples.csv`` and ``table.txt`` into directory ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results) + "\n")
    with open(out / "samples.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for g in results["groups"]:
            for rank, trial, t, late in zip(g["rank"], g["trial"], g["t_ns"], g["late"]):
                w.writerow((g["pattern"], g["class"], g["size"], g["what"], rank, trial,
                            round(t), int(late)))
    text = "\n\n".join([format_clock(results["meta"]), format_table(results["stats"])])
    (out / "table.txt").write_text(text + "\n")
    return text


def load(out):
    """Return the results dict written by :func:`write` in directory ``out``."""
    return json.loads((Path(out) / "results.json").read_text())
