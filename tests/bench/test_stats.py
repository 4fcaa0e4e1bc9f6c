"""Statistics and the table on known data."""

import math

import numpy as np

from coc.bench import report
from coc.bench.stats import bandwidth_mbs, histogram_bins, summarize


def test_summary_of_known_data():
    s = summarize(np.arange(1, 1001) * 1000.0)        # 1 .. 1000 µs
    assert s["n"] == 1000
    assert (s["min"], s["max"]) == (1000.0, 1_000_000.0)
    assert s["median"] == 500_500.0
    assert s["p90"] == 900_100.0                       # linear between order statistics
    assert s["p99"] == 990_010.0
    assert s["mean"] == 500_500.0
    assert math.isclose(s["std"], np.std(np.arange(1, 1001) * 1000.0))


def test_a_second_mode_shows_in_the_tail_not_the_median():
    """MPIBench's point: a few 30 ms timeouts move p99 and max, hardly the median."""
    t = [50_000.0] * 97 + [30_000_000.0] * 3
    s = summarize(t)
    assert s["median"] == 50_000.0 and s["p90"] == 50_000.0
    assert s["p99"] == 30_000_000.0 and s["max"] == 30_000_000.0
    assert s["mean"] > 18 * s["median"]


def test_empty_summary_is_nan():
    s = summarize([])
    assert s["n"] == 0 and math.isnan(s["median"])


def test_bandwidth():
    assert bandwidth_mbs(1 << 20, 1e6) == (1 << 20) / 1e3     # 1 MiB in 1 ms
    assert math.isnan(bandwidth_mbs(8, float("nan")))


def test_histogram_bins_cover_the_data_logarithmically():
    edges = histogram_bins([10.0, 1e4, 1e6], bins=5)
    assert edges[0] == 10.0 and math.isclose(edges[-1], 1e6)
    assert np.allclose(np.diff(np.log10(edges)), 1.0)


def test_group_stats_leave_late_trials_out():
    group = {"pattern": "PingPong", "class": "wan", "size": 1_000_000, "what": "oneway",
             "rank": [1, 1, 1, 1], "trial": [0, 1, 2, 3],
             "t_ns": [1e6, 2e6, 3e6, 99e6], "late": [False, False, False, True]}
    row = report.group_stats(group, bandwidth=True)
    assert row["n"] == 3 and row["late"] == 1
    assert row["median"] == 2e6 and row["max"] == 3e6
    assert row["mbs"] == 500.0


def test_table_has_imb_columns():
    group = {"pattern": "Allreduce", "class": "site", "size": 4096, "what": "completion",
             "rank": [0, 1], "trial": [0, 0], "t_ns": [10_000.0, 30_000.0],
             "late": [False, False]}
    text = report.format_table([report.group_stats(group, bandwidth=True)])
    head, row = text.splitlines()[1:3]
    assert head.split() == ["class", "time", "bytes", "n", "late", "min", "median", "p90",
                            "p99", "max", "MB/s"]
    assert row.split() == ["site", "completion", "4", "KiB", "2", "0", "10.0", "20.0",
                           "28.0", "29.8", "30.0", "205"]


def test_merge_pools_repeated_runs():
    def run(times, accuracy, late=False):
        group = {"pattern": "PingPong", "class": "wan", "size": 8, "what": "oneway",
                 "gap_ns": 300_000, "rank": [3] * len(times), "trial": list(range(len(times))),
                 "t_ns": times, "late": [late] * len(times)}
        return {"meta": {"seconds": 2.0, "clock": {"accuracy_ns": accuracy}},
                "groups": [group], "stats": report.all_stats([group])}

    merged = report.merge([run([1e3, 2e3], 5e3), run([3e3, 4e3, 5e3], 9e3)])
    (g,) = merged["groups"]
    assert g["trial"] == [0, 1, 2, 3, 4] and g["t_ns"] == [1e3, 2e3, 3e3, 4e3, 5e3]
    (row,) = merged["stats"]
    assert row["n"] == 5 and row["median"] == 3e3
    assert merged["meta"]["repeats"] == 2 and merged["meta"]["seconds"] == 4.0
    assert merged["meta"]["clock"]["accuracy_ns"] == 9e3        # the worse run's clock
