"""Real-site constraints on the testbed: port ranges, outbound-only sites, blocked links.

Every check is made from outside the job: listening sockets are read with ``ss`` inside each
host's network namespace while the ranks hold (``programs/hold.py``), connections are made
impossible with a real nftables rule in a gateway's namespace. Needs root (CI runs as root).
"""

import json
import os
import selectors
import shutil
import subprocess
import sys
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
    proc, hold = run_holding(start_coc_run, tmp_path, monkeypatch, "--testbed", bed.name,
                             "--topology", GOOD / "two-sites-ports.yaml", "--site", "a=2",
                             "--site", "b=2",
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


@pytest.fixture(scope="module")
def outbound_testbed():
    """two-sites where site b accepts no inbound connections: nftables on b-gw's WAN side."""
    import coc.testbed

    if shutil.which("nft") is None:
        pytest.skip("needs nft (Debian package nftables) for the firewall rule")
    with coc.testbed.up(GOOD / "two-sites-outbound.yaml", name=f"sites-ob-{os.getpid()}") as bed:
        yield bed


def connections(bed, host):
    """Return ``(local, remote)`` ``address:port`` pairs of established TCP connections."""
    out = bed.exec(host, ["ss", "-tnH", "state", "established"], capture_output=True,
                   text=True, check=True, timeout=scaled(10)).stdout
    return [tuple(line.split()[2:4]) for line in out.splitlines()]


def test_outbound_only_site_runs_its_gateway_dialing_out(outbound_testbed, tmp_path,
                                                         start_coc_run, monkeypatch):
    bed = outbound_testbed
    a_wan, b_wan = bed.address("a-gw", "wan"), bed.address("b-gw", "wan")
    proc, hold = run_holding(start_coc_run, tmp_path, monkeypatch, "--testbed", bed.name,
                             "--site", "a=1", "--site", "b=1")
    try:
        wait_for_files(hold, 2, timeout=scaled(60))
        a_listen = {port for _, port in listeners(bed, "a-gw")}
        b_links = [(local, remote) for local, remote in connections(bed, "b-gw")
                   if remote.startswith(f"{a_wan}:")]
    finally:
        status, out, err = finish(proc, hold)
    assert status == 0, err
    # b-gw made the WAN link: from its own address to a port a-gw listens on
    assert b_links, "no WAN connection from b-gw"
    for local, remote in b_links:
        assert local.startswith(f"{b_wan}:")
        assert int(remote.rpartition(":")[2]) in a_listen
    assert [json.loads(line)["hosts"] for line in out.splitlines()][0] == ["a1", "b1"]


def test_firewall_really_blocks_inbound(outbound_testbed, tmp_path):
    """The rule is real: a-gw cannot connect to a port b-gw listens on over the WAN."""
    bed = outbound_testbed
    server = bed.popen("b-gw", [sys.executable, "-c",
                                "import socket, time; s = socket.socket(); "
                                "s.bind(('0.0.0.0', 45000)); s.listen(); print('ready', "
                                "flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(server.stdout, selectors.EVENT_READ)
            assert sel.select(scaled(20)), "the listener in b-gw did not start"
        assert server.stdout.readline() == b"ready\n"
        probe = ("import socket, sys; s = socket.socket(); s.settimeout(1.0)\n"
                 "try:\n    s.connect((sys.argv[1], 45000)); print('open')\n"
                 "except OSError as e:\n    print('blocked', e)\n")
        inside = bed.exec("b1", [sys.executable, "-c", probe, bed.address("b-gw", "b-lan")],
                          capture_output=True, text=True, timeout=scaled(20)).stdout
        outside = bed.exec("a-gw", [sys.executable, "-c", probe, bed.address("b-gw", "wan")],
                           capture_output=True, text=True, timeout=scaled(20)).stdout
    finally:
        server.kill()
        server.communicate(timeout=scaled(10))
    assert inside.startswith("open")            # inside its site b-gw still accepts
    assert outside.startswith("blocked"), outside


def test_undeclared_firewall_fails_before_any_rank_naming_the_link(outbound_testbed, coc_run,
                                                                    tmp_path):
    """The same testbed run with plain two-sites: a-gw dials b-gw, is dropped, coc-run says so."""
    marker = tmp_path / "started"
    result = coc_run("--testbed", outbound_testbed.name, "--topology", "two-sites", "--site",
                     "a=1", "--site", "b=1", "--",
                     sys.executable, "-c", f"open({str(marker)!r}, 'w')", timeout=scaled(90))
    assert result.returncode != 0
    assert "the link a-gw -> b-gw over network wan cannot be made, no rank was started" \
        in result.stderr, result.stderr
    assert "mark site b outbound_only" in result.stderr
    assert not marker.exists()
