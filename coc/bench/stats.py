"""Summaries of time distributions: the figures of the IMB-style table, never a mean alone.

Percentiles interpolate linearly between order statistics (NumPy's default, so the median
is the usual one); bandwidth is size divided by the median time.
"""

import numpy as np

__all__ = ["QUANTILES", "summarize", "bandwidth_mbs", "histogram_bins"]

#: Columns of the table, in order: (name, percentile).
QUANTILES = (("min", 0), ("median", 50), ("p90", 90), ("p99", 99), ("max", 100))


def summarize(times_ns):
    """Return ``{n, min, median, p90, p99, max, mean, std}`` of ``times_ns`` (ns).

    Empty input gives ``n = 0`` and NaN elsewhere.

    Examples
    --------
    >>> s = summarize(range(1, 101))
    >>> s["n"], s["min"], s["median"], s["p90"], s["p99"], s["max"], s["mean"]
    (100, 1.0, 50.5, 90.1, 99.01, 100.0, 50.5)
    """
    t = np.asarray(times_ns, dtype=np.float64)
    if t.size == 0:
        return {"n": 0, **{name: float("nan") for name, _ in QUANTILES},
                "mean": float("nan"), "std": float("nan")}
    q = np.percentile(t, [p for _, p in QUANTILES])
    out = {"n": int(t.size)}
    out.update({name: round(float(v), 6) for (name, _), v in zip(QUANTILES, q)})
    out["mean"] = round(float(t.mean()), 6)
    out["std"] = round(float(t.std()), 6)
    return out


def bandwidth_mbs(size, time_ns):
    """Return ``size`` bytes over ``time_ns`` in MB/s (10^6 bytes per second).

    Examples
    --------
    >>> bandwidth_mbs(1_000_000, 1_000_000)     # 1 MB in 1 ms
    1000.0
    >>> bandwidth_mbs(0, 500.0)
    0.0
    """
    if not time_ns or time_ns != time_ns:
        return float("nan")
    return size / time_ns * 1e3


def histogram_bins(times_ns, bins=60):
    """Return logarithmic bin edges covering ``times_ns`` (distributions span decades).

    Examples
    --------
    >>> edges = histogram_bins([1000, 100000], bins=2)
    >>> [round(e) for e in edges]
    [1000, 10000, 100000]
    """
    t = np.asarray(times_ns, dtype=np.float64)
    t = t[t > 0]
    if t.size == 0:
        return np.array([1.0, 10.0])
    lo, hi = t.min(), t.max()
    if hi <= lo:
        lo, hi = lo * 0.9, hi * 1.1
    return np.geomspace(lo, hi, bins + 1)
