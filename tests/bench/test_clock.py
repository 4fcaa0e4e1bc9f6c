"""The global clock: injected clock errors are removed to within the accuracy the tool reports."""

import pytest

from coc.bench import report
from coc.bench.clock import Calibration, accuracy, apply_test_skew
from coc.errors import CocError

# Rank 1's clock 3.7 s ahead and 500 ppm fast, rank 2's 12 ms behind; rank 0's untouched.
SKEW = "1:3700000000:500,2:-12000000:0"


def _check_corrected(clock):
    """Every rank's global clock agrees with rank 0's to within its reported accuracy."""
    ranks = clock["ranks"]
    for r, c in enumerate(ranks):
        # truth_ns: global time minus the shared, undistorted OS clock, read on each rank.
        error = abs(c["truth_ns"] - ranks[0]["truth_ns"])
        assert error <= c["accuracy_ns"] + 2000, (r, error, c)
        assert c["accuracy_ns"] < 1e8, c      # calibration worked at all (the skew is 3.7 s)
    # -3.7 s, and -500 ppm of the ~1 s between the hook and the calibration's reference.
    assert abs(ranks[1]["offset_ns"] + 3.7e9) < ranks[1]["bound_ns"] + 5e6
    assert abs(ranks[2]["offset_ns"] - 12e6) < ranks[2]["bound_ns"] + 1000
    assert ranks[1]["drift_applied"]
    assert abs(ranks[1]["drift"] + 500e-6) <= ranks[1]["drift_bound"] + 1e-6
    assert not ranks[2]["drift_applied"] or abs(ranks[2]["drift"]) < 50e-6


def test_injected_offsets_removed_under_mpiexec(job, tmp_path):
    res = job("mpiexec", ["Empty", "--quick", "--no-plots", "--out", "out"], nprocs=3,
              env={"COC_BENCH_TEST_SKEW": SKEW})
    assert res.returncode == 0
    _check_corrected(report.load(tmp_path / "out")["meta"]["clock"])


def test_injected_offsets_removed_under_coc_run(job, tmp_path):
    res = job("coc-run", ["Empty", "--quick", "--no-plots", "--out", "out"], nprocs=3,
              env={"COC_BENCH_TEST_SKEW": SKEW}, launcher_args=["-x", "COC_BENCH_TEST_SKEW"])
    assert res.returncode == 0
    _check_corrected(report.load(tmp_path / "out")["meta"]["clock"])


def test_empty_trials_start_on_time(job, tmp_path):
    """With the clock corrected, empty trials begin within the residual jitter shown."""
    res = job("mpiexec", ["Empty", "--quick", "--no-plots", "--out", "out"], nprocs=2,
              env={"COC_BENCH_TEST_SKEW": SKEW})
    assert res.returncode == 0
    stats = report.load(tmp_path / "out")["stats"]
    (empty,) = stats
    assert empty["n"] >= 40 and empty["min"] >= 0
    # Without correction rank 1 would start 3.7 s early or late: every trial late or waiting.
    assert empty["median"] < 1e8


def test_accuracy_is_the_worse_end_of_the_run():
    cal = Calibration(10.0, 0.0, 0.0, 3000.0, 0.0, False)
    assert accuracy(cal, 500.0, 1000.0) == 3000.0
    assert accuracy(cal, -2500.0, 1000.0) == 3500.0


def test_skew_hook_rejects_garbage():
    with pytest.raises(CocError, match="RANK:OFFSET_NS:PPM"):
        apply_test_skew(0, "1:2")
    assert apply_test_skew(3, "1:5:0") == (0, 0.0)
