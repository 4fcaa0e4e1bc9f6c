"""Tables and plots of ``coc bench reproduce``: every path's rows side by side.

Rows are ``{size, median, p10, p90, p99, n[, samples]}`` in µs (:mod:`coc.bench.paths`); the
relays' C tool gives no p10/p90, and tables then show its p99 instead.
"""

from coc.bench import plots, report

__all__ = ["STYLES", "us", "cell", "ratio", "pingpong_table", "plot_pingpong",
           "plot_distributions", "plot_sweep"]


def us(v):
    """Format µs for a table: µs below 1 ms, ms above ("–" for None).

    Examples
    --------
    >>> us(8.25), us(250.0), us(1923.0), us(None)
    ('8.2 µs', '250 µs', '1.92 ms', '–')
    """
    if v is None:
        return "–"
    return f"{v / 1e3:.2f} ms" if v >= 1000 else f"{v:.0f} µs" if v >= 100 else f"{v:.1f} µs"


def cell(row):
    """Return one row as a table cell: median (p10–p90), or median (p99) without p10."""
    if row is None:
        return "–"
    if row.get("p10") is not None:
        return f"{us(row['median'])} ({us(row['p10'])}–{us(row['p90'])})"
    return f"{us(row['median'])} (p99 {us(row['p99'])})"


def ratio(a, b):
    """Return the ratio of two rows' medians as text ("–" when either is missing)."""
    if a is None or b is None or not b["median"]:
        return "–"
    return f"{a['median'] / b['median']:.2f}"


def pingpong_table(series, sizes, first):
    """Markdown: one row per size, each path's median (spread), and ``first`` over the others."""
    others = [k for k in series if k != first]
    lines = ["| size | " + " | ".join(series) + " | "
             + " | ".join(f"{first} / {k}" for k in others) + " |",
             "|---:|" + "---:|" * (len(series) + len(others))]
    for s in sizes:
        lines.append(f"| {report.size_text(s)} | "
                     + " | ".join(cell(series[k].get(s)) for k in series) + " | "
                     + " | ".join(ratio(series[first].get(s), series[k].get(s))
                                  for k in others) + " |")
    return lines


STYLES = ("tab:red", "black", "tab:blue", "tab:green", "tab:purple")


def plot_pingpong(series, path, title, model=None):
    """Latency and bandwidth (size / half round trip) against size, every path; PNG at ``path``."""
    plt = plots.pyplot()
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(10, 3.8))
    for (label, rows), color in zip(series.items(), STYLES):
        pts = [rows[s] for s in sorted(rows)]
        x = [max(p["size"], 1) for p in pts]
        lat.plot(x, [p["median"] for p in pts], "o-", color=color, label=label, markersize=3)
        if pts and pts[0].get("p10") is not None:
            lat.fill_between(x, [p["p10"] for p in pts], [p["p90"] for p in pts], color=color,
                             alpha=0.15)
        bw.plot(x, [p["size"] / p["median"] for p in pts], "o-", color=color, label=label,
                markersize=3)
    if model:
        lat.plot([max(s, 1) for s, _ in model], [t for _, t in model], ":", color="gray",
                 label="coc's model of the real machine")
    from matplotlib.ticker import FuncFormatter
    for ax, ylabel in ((lat, "half round trip (µs)"), (bw, "bandwidth (MB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plots.log_axis(ax.yaxis)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0.02, not 0.0
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    lat.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return plots.save(plt, fig, path)


def plot_distributions(panels, path, title):
    """Histograms (log bins, fraction of trials) of every path's samples, a panel per operation."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from coc.bench.stats import histogram_bins
    plt = plots.pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), squeeze=False)
    for ax, (label, per_path) in zip(axes[0], panels.items()):
        allt = [t for rows in per_path.values() if rows for t in rows["samples"]]
        bins = histogram_bins([t * 1e3 for t in allt], bins=40) / 1e3
        for (name, rows), color in zip(per_path.items(), STYLES):
            if rows:
                n = len(rows["samples"])
                ax.hist(rows["samples"], bins=bins, histtype="step", color=color, label=name,
                        weights=[1 / n] * n)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelsize=7, labelrotation=45)
        ax.set_xlabel("time (µs)")
        ax.set_title(label, fontsize=9)
    axes[0][0].set_ylabel("fraction of trials")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return plots.save(plt, fig, path)


def plot_sweep(series, sizes, delays_ms, path, title):
    """Half round trip against injected latency (left) and what each path adds to it (right).

    ``series`` is ``{path: {delay_ms: {size: row}}}``; the first path is drawn solid, the
    others dashed.
    """
    plt = plots.pyplot()
    fig, (total, extra) = plt.subplots(1, 2, figsize=(11, 4))
    first = next(iter(series))
    for (name, per), color in zip(series.items(), STYLES):
        for s, marker in zip(sizes, "os^"):
            xs = [ms for ms in delays_ms if s in per[ms]]
            med = [per[ms][s]["median"] / 1e3 for ms in xs]
            style = dict(marker=marker, linestyle="-" if name == first else "--",
                         color=color, markersize=4, label=f"{name}, {report.size_text(s)}")
            total.plot(xs, med, **style)
            extra.plot(xs, [m - ms for m, ms in zip(med, xs)], **style)
    total.set_ylabel("half round trip, median (ms)")
    extra.set_ylabel("median − injected latency (ms)")
    extra.set_xscale("symlog", linthresh=1)
    for ax in (total, extra):
        ax.set_xlabel("injected one-way WAN latency (ms)")
        ax.grid(True, alpha=0.3)
    total.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return plots.save(plt, fig, path)
