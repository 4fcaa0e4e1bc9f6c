"""The soak benchmark, short: mixed traffic across sites, checksums, memory sampled."""

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).parents[2] / "benchmarks" / "soak.py"


def test_a_short_soak_has_no_checksum_error_and_samples_every_process(tmp_path):
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, str(SOAK), "--seconds", "20", "--warmup", "5",
                           "--sample", "0.5", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert sorted(r["rank"] for r in result["ranks"]) == [0, 1, 2, 3]
    for report in result["ranks"]:
        assert report["rounds"] > 0
        assert sum(report["errors"].values()) == 0, report
    memory = result["memory"]
    assert sorted(role for role in memory if role.startswith("rank")) == \
        ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert sum(role.startswith("gateway") for role in memory) == 2
    for role, m in memory.items():
        assert m["samples"] >= 5, role
        assert 0 < m["rss_max_kib"] < 4 << 20, role      # a sanity bound, not a slope
    assert "checksum errors" in done.stdout


def test_slope_is_least_squares_per_unit_of_time():
    sys.path.insert(0, str(SOAK.parent))
    try:
        import soak
    finally:
        sys.path.remove(str(SOAK.parent))
    assert soak.slope([(0, 10), (60, 70), (120, 130)]) == 1.0
    table = soak.summarize({"rank 0": [(0, 500), (10, 100), (20, 110), (30, 120)]}, warmup=10)
    assert table["rank 0"]["slope_kib_per_min"] == 60.0
    assert table["rank 0"]["rss_max_kib"] == 500
