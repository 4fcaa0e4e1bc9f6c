"""Every output file of a run is produced and readable; --quick runs end to end on both backends."""

import csv
import json
import subprocess
import sys

import matplotlib.image
import pytest
from PIL import Image

from coc.bench import patterns, report
from hang_bounds import scaled

# A quick run of every pattern took 53 s with the machine loaded (load average 10), close
# to pytest's default limit of 120 s; the jobs are bounded by the job fixture's 240 s.
pytestmark = pytest.mark.timeout(300)

# coc-run placement giving one pair of each class: ranks 0,1 on a1, 2 on a2, 3 on b1.
THREE_CLASSES = ["--host", "a1", "--host", "a2:1", "--host", "b1:1", "-n", "4"]


def _check_outputs(out, pattern_names):
    results = json.loads((out / "results.json").read_text())
    assert {s["pattern"] for s in results["stats"]} == set(pattern_names)
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(len(g["t_ns"]) for g in results["groups"])
    assert set(rows[0]) == set(report.CSV_FIELDS)
    assert sorted(float(r["t_ns"]) for r in rows)[len(rows) // 2] > 0
    table = (out / "table.txt").read_text()
    assert "global clock" in table and all(f"# {p}" in table for p in pattern_names)
    pngs = sorted(out.glob("*.png"))
    for png in pngs:
        with Image.open(png) as im:
            im.verify()
        assert matplotlib.image.imread(png).shape[2] in (3, 4)
    return results, {p.name for p in pngs}


def test_every_output_file_is_written_and_readable(job, tmp_path):
    names = ["PingPong", "Barrier", "Empty"]
    res = job("mpiexec", [*names, "--quick", "--out", "out"], nprocs=2)
    assert res.returncode == 0, res.stderr
    results, pngs = _check_outputs(tmp_path / "out", names)
    assert {"curves.png", "hist-PingPong-host.png", "hist-Barrier-host.png",
            "ranks-Barrier.png", "ranks-Empty.png"} <= pngs
    assert results["meta"]["backend"] == "mpi4py" and results["meta"]["size"] == 2
    assert "1/5" in res.stderr and "5/5" in res.stderr        # progress, one line a step
    assert "PingPong" in res.stdout                            # the table on the terminal


def test_quick_under_mpiexec(job, tmp_path):
    res = job("mpiexec", ["--quick", "--out", "out"], nprocs=4)
    assert res.returncode == 0, res.stderr
    results, _ = _check_outputs(tmp_path / "out", [p.name for p in patterns.PATTERNS])
    assert results["meta"]["library"].startswith("mpi4py")
    assert all(s["n"] > 0 for s in results["stats"])


def test_quick_under_coc_run_separates_host_site_and_wan(job, tmp_path):
    res = job("coc-run", ["--quick", "--out", "out"], launcher_args=THREE_CLASSES)
    assert res.returncode == 0, res.stderr
    results, pngs = _check_outputs(tmp_path / "out", [p.name for p in patterns.PATTERNS])
    meta = results["meta"]
    assert meta["backend"] == "coc"
    assert meta["locations"] == [["a", "a1"], ["a", "a1"], ["a", "a2"], ["b", "b1"]]
    pingpong = {(s["class"], s["what"]) for s in results["stats"] if s["pattern"] == "PingPong"}
    assert pingpong == {(c, w) for c in ("host", "site", "wan") for w in ("oneway", "half-rtt")}
    assert {"hist-PingPong-wan.png", "hist-Isend-site.png", "ranks-Alltoall.png"} <= pngs
    # How much slower across sites than within a host is a benchmark figure
    # (docs/performance.md), not something a test on a busy machine can assert.
    assert all(s["n"] > 0 for s in results["stats"] if s["pattern"] == "PingPong")


def test_without_matplotlib_the_run_says_in_one_line_that_plots_were_skipped(job, tmp_path):
    hidden = tmp_path / "hidden"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'matplotlib' (hidden by the test)\")\n")
    res = job("coc-run", ["PingPong", "--quick", "--out", "out"], nprocs=2,
              env={"PYTHONPATH": str(hidden)})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    skipped = [line for line in res.stderr.splitlines() if "plots skipped" in line]
    assert skipped == ["coc bench run: plots skipped: matplotlib is not installed "
                       "(pip install 'coc[draw]')"], res.stderr
    assert (tmp_path / "out" / "results.json").is_file()
    assert not list((tmp_path / "out").glob("*.png"))


def test_cli_lists_patterns_and_rejects_unknown_ones():
    help_text = subprocess.run([sys.executable, "-m", "coc.cli", "bench", "run", "--help"],
                               capture_output=True, text=True, timeout=scaled(30)).stdout
    assert all(p.name in help_text for p in patterns.PATTERNS)
    bad = subprocess.run([sys.executable, "-m", "coc.bench", "run", "Pingpung"],
                         capture_output=True, text=True, timeout=scaled(30))
    assert bad.returncode == 2 and "unknown pattern 'Pingpung'" in bad.stderr
