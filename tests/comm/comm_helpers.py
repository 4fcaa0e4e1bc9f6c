"""Helpers of the comm tests: run rank programs under coc-run and read their reports."""


import json
import os
import subprocess
import sys
from pathlib import Path
from hang_bounds import scaled

PROGRAMS = Path(__file__).parent / "programs"
COC_RUN = [sys.executable, "-m", "coc.launcher.cli"]


#: Rank counts of the issue; 2 ranks are placed one per site.
SIZES = (1, 2, 4, 8)


def placement(n):
    """Return coc-run's options placing ``n`` ranks over the two sites."""
    return ["--site", "a=1", "--site", "b=1"] if n == 2 else ["-n", str(n)]


def run_job(program, n, *args, timeout=scaled(60), env=None, check=True):
    """Run ``program`` on ``n`` ranks; return ``(completed process, {rank: report})``."""
    cmd = [*COC_RUN, *placement(n), "--timeout", str(timeout), str(PROGRAMS / program),
           *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    reports = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            reports[report["rank"]] = report
    if check:
        assert proc.returncode == 0, f"coc-run exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert sorted(reports) == list(range(n)), f"{proc.stdout}\n{proc.stderr}"
    return proc, reports


def assert_clean(reports):
    """Assert every rank ran checks and none failed."""
    failures = {r: rep["failures"] for r, rep in reports.items() if rep["failures"]}
    assert not failures, json.dumps(failures, indent=1)
    assert all(rep["checked"] > 0 for rep in reports.values())
