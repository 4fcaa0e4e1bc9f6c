"""The application report (coc.bench.application): what examples/ programs print and write."""

import json
import subprocess
import sys

from hang_bounds import scaled

PROGRAM = """
import sys
import coc
from coc.bench.application import Stopwatch, report

comm = coc.init()
clock = Stopwatch()
with clock:
    comm.Barrier()
verified = sys.argv[1] == "pass"
report(comm, "probe", lambda: f"rank {comm.rank} holds the answer", verified=verified,
       elapsed=0.25, stopwatch=clock, json_path=sys.argv[2], params={"size": 3})
print("after the report")
"""


def _run(outcome, tmp_path):
    path = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-c", PROGRAM, outcome, str(path)],
                          capture_output=True, text=True, timeout=scaled(60),
                          stdin=subprocess.DEVNULL)
    return done, path


def test_a_verified_run_prints_both_lines_writes_the_json_and_goes_on(tmp_path):
    done, path = _run("pass", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "probe: rank 0 holds the answer: verified"
    assert lines[1].startswith("probe: time 0.250 s, communication ") and lines[1].endswith("%)")
    assert lines[2] == "after the report"
    result = json.loads(path.read_text())
    assert result["time"] == 0.25 and result["verified"] is True
    assert result["params"] == {"size": 3, "ranks": 1} and result["comm_time"] >= 0


def test_a_failed_check_says_failed_and_exits_1(tmp_path):
    done, path = _run("fail", tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0] == "probe: rank 0 holds the answer: FAILED"
    assert "after the report" not in done.stdout
    assert json.loads(path.read_text())["verified"] is False
