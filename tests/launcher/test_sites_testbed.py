"""Real-site constraints on the testbed: port ranges, outbound-only sites, blocked links.

Every check is made from outside the job: listening sockets are read with ``ss`` inside each
host's network namespace while the ranks hold (``programs/hold.py``), connections are made
impossible with a real nftables rule in a gateway's namespace. Needs root (CI runs as root).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hang_bounds import scaled
from launcher_helpers import program, wait_for_files

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the netns spawner runs "
                                 "ranks in network namespaces (CI runs these as root)")]

GOOD = Path(__file__).parents[1] / "data" / "topology-good"


def listeners(bed, host):
    """Return the ``(address, port)`` of every TCP socket listening in ``host``'s namespace."""
    out = bed.exec(host, ["ss", "-ltnH"], capture_output=True, text=True, check=True,
                   timeout=scaled(10)).stdout
    found = []
    for line in out.splitlines():
        local = line.split()[3]
        address, _, port = local.rpartition(":")
        found.append((address, int(port)))
    return found


def run_holding(start_coc_run, tmp_path, monkeypatch, *args):
    """Start ``hold.py`` under coc-run; return (process, hold dir)."""
    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv("HOLD_DIR", str(hold))          # inherited by coc-run and the ranks
    monkeypatch.setenv("HOLD_TIMEOUT", str(scaled(60)))
    proc = start_coc_run(*args, program("hold.py"))
    return proc, hold


def finish(proc, hold):
    """Release the ranks and return coc-run's (status, stdout, stderr)."""
    (hold / "release").touch()
    out, err = proc.communicate(timeout=scaled(60))
    return proc.returncode, out, err


def test_every_listening_socket_is_inside_its_hosts_port_range(two_sites_testbed, tmp_path,
                                                               start_coc_run, monkeypatch):
    """two-sites-ports: a 41000-41099, the WAN 41050-41059; --port-range b=43000-43019."""
    bed = two_sites_testbed
    proc, hold = run_holding(start_coc_run, tmp_path, monkeypatch, "--testbed", bed.name, "--topology",
                             GOOD / "two-sites-ports.yaml", "--site", "a=2", "--site", "b=2",
                             "--port-range", "b=43000-43019")
    try:
        wait_for_files(hold, 4, timeout=scaled(60))
        ranges = {"a1": (41000, 41099), "a-gw": (41050, 41059),
                  "b1": (43000, 43019), "b-gw": (43000, 43019)}
        seen = {host: listeners(bed, host) for host in ranges}
    finally:
        status, out, err = finish(proc, hold)
    assert status == 0, err
    for host, (low, high) in ranges.items():
        assert seen[host], f"nothing listens on {host}"
        for address, port in seen[host]:
            assert low <= port <= high, (host, address, port)
    assert len(seen["a1"]) == 2                  # both ranks of site a run on a1
    assert {r["rank"] for r in map(json.loads, out.splitlines())} == {0, 1, 2, 3}


def test_a_range_too_small_is_an_error_naming_it(two_sites_testbed, coc_run):
    """Two ranks on a1 and one port: the second rank cannot listen and says which range."""
    result = coc_run("--testbed", two_sites_testbed.name, "--site", "a=2", "--port-range",
                     "a=41000-41000", program("hold.py"), timeout=scaled(60),
                     env={"HOLD_DIR": "/nonexistent", "HOLD_TIMEOUT": "1"})
    assert result.returncode != 0
    assert "no free port in the port range 41000-41000 on 10.1.0.1" in result.stderr
