"""The example programs run under coc-run across both sites and say what they promise."""

import subprocess
from pathlib import Path

import pytest
from comm_helpers import COC_RUN
from hang_bounds import scaled

pytestmark = pytest.mark.timeout(120)
EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(name, n):
    proc = subprocess.run([*COC_RUN, "-n", str(n), "--timeout", "60", str(EXAMPLES / name)],
                          capture_output=True, text=True, timeout=scaled(90), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
