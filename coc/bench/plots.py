"""PNG plots of a run: histograms per size, per-rank completions, latency and bandwidth curves.

- ``hist-PATTERN-CLASS.png``: one histogram per size (logarithmic time bins, counts on a log
  scale so a second mode of a few trials still shows);
- ``ranks-PATTERN.png``: every sample, time against rank, one panel per size — MPIBench's
  per-process view, where one slow rank or a timeout band stands out;
- ``curves.png``: PingPong median and p10–p90 band, and bandwidth, against size, one line
  per class (within host, within site, across sites);
- :func:`plot_compare` draws the same curves for several runs (coc, MPI, relays) in one figure.
"""

import math
from pathlib import Path

import numpy as np

from coc.bench.report import size_text
from coc.bench.stats import bandwidth_mbs, histogram_bins

__all__ = ["plot_run", "plot_compare", "curve_points", "pyplot", "save", "log_axis"]

DPI = 80
CLASS_STYLE = {"host": "tab:green", "site": "tab:blue", "wan": "tab:red"}
WHAT_STYLE = {"oneway": "-", "half-rtt": "--", "completion": "-"}
CLASS_TITLE = {"host": "within host", "site": "within site", "wan": "across sites"}


#: What a run without matplotlib (an optional dependency: ``coc[draw]``) prints instead of plots.
SKIPPED = "plots skipped: matplotlib is not installed (pip install 'coc[draw]')"


def available():
    """Return True when matplotlib can be imported (the plots need it; the rest does not)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pyplot():
    """Return matplotlib.pyplot on the non-interactive Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _kept(group):
    """Return a group's times in µs, late trials left out."""
    return np.array([t for t, late in zip(group["t_ns"], group["late"]) if not late]) / 1e3


def _grid(plt, n, width=3.2, height=2.4):
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def save(plt, fig, path):
    """Write ``fig`` to ``path`` as a small PNG and close it; return ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def log_axis(axis):
    """Put a log axis on plain-number major labels and no minor labels (no 4x10^2 clutter)."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(NullFormatter())


def _by(groups, *keys):
    out = {}
    for g in groups:
        out.setdefault(tuple(g[k] for k in keys), []).append(g)
    return out


def _histograms(plt, pattern, cls, groups, out):
    sizes = sorted({g["size"] for g in groups})
    fig, axes = _grid(plt, len(sizes))
    for ax, size in zip(axes, sizes):
        for g in (g for g in groups if g["size"] == size):
            t = _kept(g)
            if t.size == 0:
                continue
            ax.hist(t, bins=histogram_bins(t, 40), histtype="step",
                    label=f"{g['what']} (median {np.median(t):.1f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.set_title(f"{size_text(size)}" if size else pattern, fontsize=9)
        ax.set_xlabel("µs", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.suptitle(f"{pattern}, {CLASS_TITLE.get(cls, cls)}: time distribution", fontsize=10)
    return save(plt, fig, out / f"hist-{pattern}-{cls}.png")


def _per_rank(plt, pattern, groups, out):
    sizes = sorted({g["size"] for g in groups})
    fig, axes = _grid(plt, len(sizes))
    rng = np.random.default_rng(0)
    for ax, size in zip(axes, sizes):
        for g in (g for g in groups if g["size"] == size):
            ranks = np.array(g["rank"], dtype=float)
            late = np.array(g["late"], dtype=bool)
            t = np.array(g["t_ns"]) / 1e3
            y = ranks + rng.uniform(-0.25, 0.25, ranks.size)
            ax.scatter(t[~late], y[~late], s=3, alpha=0.5, color="tab:blue")
            ax.scatter(t[late], y[late], s=3, alpha=0.5, color="tab:gray")
        ax.set_xscale("log")
        log_axis(ax.xaxis)
        ax.set_title(f"{size_text(size)}" if size else pattern, fontsize=9)
        ax.set_xlabel("completion after start (µs)", fontsize=8)
        ax.set_ylabel("rank", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{pattern}: every trial's completion, per rank", fontsize=10)
    return save(plt, fig, out / f"ranks-{pattern}.png")


def curve_points(groups, what):
    """Return ``[(size, p10, median, p90)]`` in µs for the groups of kind ``what``, by size."""
    points = []
    for g in sorted((g for g in groups if g["what"] == what), key=lambda g: g["size"]):
        t = _kept(g)
        if t.size:
            p10, med, p90 = np.percentile(t, [10, 50, 90])
            points.append((g["size"], p10, med, p90))
    return points


def _curves(axes, label, points, color, style="-"):
    """Draw latency (median, band) and bandwidth curves of ``[(size, lo, median, hi)]``."""
    if not points:
        return
    size, p10, med, p90 = map(np.array, zip(*points))
    lat, bw = axes
    lat.plot(size, med, style, color=color, marker=".", label=label)
    lat.fill_between(size, p10, p90, color=color, alpha=0.15)
    keep = size >= 1024
    if keep.any():
        bw.plot(size[keep], [bandwidth_mbs(s, m * 1e3) for s, m in zip(size[keep], med[keep])],
                style, color=color, marker=".", label=label)


def _curve_axes(plt, title):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    lat, bw = axes
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    lat.set_yscale("log")
    log_axis(lat.yaxis)
    lat.set_ylabel("time (µs): median, p10–p90")
    bw.set_ylabel("bandwidth (MB/s, size / median)")
    fig.suptitle(title, fontsize=10)
    return fig, axes


def plot_run(results, out):
    """Write every plot of one run into directory ``out``; return the paths."""
    plt = pyplot()
    out = Path(out)
    groups = results["groups"]
    paths = [_histograms(plt, pattern, cls, gs, out)
             for (pattern, cls), gs in _by(groups, "pattern", "class").items()]
    paths += [_per_rank(plt, pattern, gs, out)
              for (pattern, what), gs in _by(groups, "pattern", "what").items()
              if what == "completion"]
    pingpong = [g for g in groups if g["pattern"] == "PingPong"]
    if pingpong:
        fig, axes = _curve_axes(plt, f"PingPong, {results['meta']['backend']}: "
                                     "one-way (global clock, solid) and half round trip (dashed)")
        for cls, gs in _by(pingpong, "class").items():
            for what in ("oneway", "half-rtt"):
                _curves(axes, f"{CLASS_TITLE.get(cls[0], cls[0])}, {what}",
                        curve_points(gs, what), CLASS_STYLE.get(cls[0], "k"), WHAT_STYLE[what])
        for ax in axes:
            ax.legend(fontsize=7)
        paths.append(save(plt, fig, out / "curves.png"))
    return paths


def plot_compare(series, path, title):
    """Draw latency and bandwidth curves of several runs in one PNG.

    ``series`` is ``[(label, points, color, style)]`` with ``points`` as
    :func:`curve_points` returns them (a reference without a distribution may give the
    median as its band).
    """
    plt = pyplot()
    fig, axes = _curve_axes(plt, title)
    for label, points, color, style in series:
        _curves(axes, label, points, color, style)
    for ax in axes:
        ax.legend(fontsize=7)
    return save(plt, fig, Path(path))
