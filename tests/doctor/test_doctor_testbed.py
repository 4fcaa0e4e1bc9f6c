"""``coc doctor`` on the testbed finds each planted fault and says what to do.

Faults are real where this machine can make them: a port blocked by an nftables rule in
b-gw's namespace, an interface whose address is removed from b2, a site whose Python cannot
import coc. A clock skew cannot be made here (every namespace shares the machine's clock),
so it is faked by an offset injected through ``COC_DOCTOR_CLOCK_OFFSET``, which only the
doctor's probe reads. Needs root (CI runs as root).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hang_bounds import scaled

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the doctor's probe "
                                 "runs in network namespaces (CI runs these as root)")]

TOPOLOGY = Path(__file__).parents[1] / "data" / "topology-good" / "two-sites-small.yaml"


@pytest.fixture(scope="module")
def bed():
    import coc.testbed

    with coc.testbed.up(TOPOLOGY, name=f"doctor-{os.getpid()}") as testbed:
        yield testbed


def doctor(bed, *args, env=None):
    """Run ``coc doctor`` on the testbed; return (exit code, its table)."""
    done = subprocess.run([sys.executable, "-m", "coc.cli", "doctor", str(TOPOLOGY),
                           "--testbed", bed.name, "--timeout", str(scaled(100)), *args],
                          capture_output=True, text=True, timeout=scaled(150),
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


def lines_with(table, status):
    return [line for line in table.splitlines() if f"  {status}  " in line]


def test_a_sound_testbed_can_run_a_job(bed):
    code, table = doctor(bed)
    assert code == 0, table
    assert not lines_with(table, "problem")
    assert "interface  host b2" in table and "a job can run" in table


def test_blocked_port_names_the_link_and_the_fix(bed):
    if shutil.which("nft") is None:
        pytest.skip("needs nft (Debian package nftables) for the firewall rule")
    bed.block_inbound("b-gw", ["wan"])
    try:
        code, table = doctor(bed)
    finally:
        bed.unblock("b-gw")
    assert code == 1, table
    (problem,) = lines_with(table, "problem")
    assert problem.startswith("link") and "a-gw -> b-gw over network wan" in problem
    assert "mark site b outbound_only" in table
    assert "a job cannot run: 1 problem" in table


def test_missing_interface_is_named(bed):
    dev = next(i["dev"] for i in bed.interfaces("b2"))
    subprocess.run(["ip", "-n", bed.namespace("b2"), "addr", "del", "10.2.0.2/24", "dev", dev],
                   check=True, timeout=scaled(10))
    try:
        code, table = doctor(bed)
    finally:
        subprocess.run(["ip", "-n", bed.namespace("b2"), "addr", "add", "10.2.0.2/24", "dev",
                        dev], check=True, timeout=scaled(10))
    assert code == 1, table
    assert any("host b2" in line and "b-lan (eth0, 10.2.0.2) is missing" in line
               for line in lines_with(table, "problem")), table
    assert "bring up 10.2.0.2 on b2" in table


def test_wrong_python_names_the_site_and_the_fix(bed, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=scaled(60))
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"sites:\n  b:\n    python: {bare / 'bin' / 'python'}\n")
    code, table = doctor(bed, "--profile", str(profile))
    assert code == 1, table
    (problem,) = lines_with(table, "problem")
    assert problem.startswith("python") and "site b" in problem
    assert f"{bare / 'bin' / 'python'} cannot import coc" in problem


def test_clock_skew_is_reported_as_a_warning(bed):
    """The skew is faked (see the module's docstring): b1's probe adds 5 s to its clock."""
    code, table = doctor(bed, env={"COC_DOCTOR_CLOCK_OFFSET": "b1=5"})
    assert code == 0, table                   # a job still runs
    (warning,) = [line for line in lines_with(table, "warning") if line.startswith("clock")]
    assert "host b1" in warning and "+5.0" in warning
    assert "synchronise the clocks" in table
