"""The applications benchmark, at CI size: one table row and one JSON report per program."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hang_bounds import scaled

APPLICATIONS = Path(__file__).parents[2] / "benchmarks" / "applications.py"

pytestmark = pytest.mark.timeout(scaled(240))


def test_quick_run_tabulates_each_application_and_keeps_its_reports(tmp_path):
    out = tmp_path / "apps.json"
    done = subprocess.run([sys.executable, str(APPLICATIONS), "--quick", "--only", "heat",
                           "isort", "--json", str(out)],
                          capture_output=True, text=True, timeout=scaled(200),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| heat")
            or line.startswith("| isort")]
    assert len(rows) == 2 and all("(CI size)" in row for row in rows), done.stdout
    result = json.loads(out.read_text())
    assert sorted(result) == ["heat", "isort"]
    for name, entry in result.items():
        [report] = entry["runs"]
        assert report["verified"] is True, name
        assert report["params"]["ranks"] == 8
        assert 0 <= report["comm_time"] and report["time"] > 0
