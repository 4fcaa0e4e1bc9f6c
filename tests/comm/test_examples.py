"""The example programs run under coc-run across both sites and say what they promise."""

import json
import re
import subprocess
from pathlib import Path

import pytest
from comm_helpers import COC_RUN
from hang_bounds import scaled

pytestmark = pytest.mark.timeout(120)
EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(name, n, *args, returncode=0):
    proc = subprocess.run([*COC_RUN, "-n", str(n), "--timeout", "60", "--watchdog", "20",
                           str(EXAMPLES / name),
                           *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(90), stdin=subprocess.DEVNULL)
    assert proc.returncode == returncode, proc.stdout + proc.stderr
    return proc.stdout


def test_ring():
    out = run_example("ring.py", 4)
    assert "rank 0 on site a got {'from': 3, 'site': 'b'} from rank 3" in out
    assert len(out.splitlines()) == 4


def test_allreduce_crosses_sites_less_with_topology():
    lines = run_example("allreduce.py", 8).splitlines()
    crossed = {line.split(":")[0].strip(): int(line.split(", ")[1].split()[0]) for line in lines}
    assert crossed == {"flat": 8, "topology": 2}


def test_asyncio_service():
    out = run_example("asyncio_service.py", 4)
    assert "rank 0 answered 9 requests" in out
    assert "rank 3 on site b got [900, 961, 1024]" in out


def test_hello_the_readme_main_job():
    """README's main command: 8 ranks over both sites, a ring and an allreduce across them."""
    out = run_example("hello.py", 8)
    for rank in range(8):
        site = "a" if rank < 4 else "b"
        assert f"rank {rank} of 8 on site {site}, host {site}" in out
    assert "rank 0 received 'greetings from rank 7 on site b'" in out
    assert "sum of 1..8 over 2 sites: 36 (expected 36)" in out


#: The papers' applications (docs/examples.md) and the word their first report line starts with.
APPLICATIONS = {"heat.py": "heat", "list_ranking.py": "list ranking", "lanczos.py": "lanczos",
                "hpl.py": "hpl", "render.py": "render", "isort.py": "isort", "md.py": "md"}


@pytest.mark.parametrize("program", sorted(APPLICATIONS))
def test_application_verifies_itself_across_two_sites(program, tmp_path):
    """At its CI size on 8 ranks over both sites, each application checks its answer, reports
    its time and communication share, and writes the JSON a benchmark drives it by."""
    name = APPLICATIONS[program]
    report = tmp_path / "report.json"
    lines = run_example(program, 8, "--json", report).splitlines()
    assert lines[0].startswith(f"{name}: ") and lines[0].endswith(": verified"), lines
    timing = re.fullmatch(rf"{name}: time ([0-9.]+) s, communication ([0-9.]+) s "
                          r"\(([0-9.]+) %\)", lines[1])
    assert timing, lines
    result = json.loads(report.read_text())
    assert result["verified"] is True
    assert result["time"] == pytest.approx(float(timing[1]), abs=1e-3)
    assert result["comm_time"] == pytest.approx(float(timing[2]), abs=1e-3)
    assert 0 <= result["comm_time"] and result["params"]["ranks"] == 8


def test_application_that_fails_its_check_exits_nonzero():
    """A run whose answer misses the check says FAILED and ends the job with a non-zero code."""
    out = run_example("md.py", 8, "--steps", "5", "--drift", "0", returncode=1)
    assert out.splitlines()[0].endswith(": FAILED"), out
