"""A gateway's wide-area link cut (``ip link set down``) on the two-sites-ha testbed: the
job's traffic moves to the other gateways and every checksum holds.

The gateway daemon keeps running with its TCP connections open, so only the engines'
liveness check notices: a-gw1 and the site b gateways stop hearing each other, route around
the cut link, and the endpoints send again what died in it. Needs root.
"""

import ipaddress
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import coc.testbed
from hang_bounds import scaled

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: coc testbed builds "
                                 "network namespaces (CI runs these as root)")]

TRAFFIC = Path(__file__).parents[1] / "faults" / "programs" / "traffic.py"
WAN = ipaddress.ip_network("198.51.100.0/24")


def _wan_interface(namespace):
    """Return the name of the interface of ``namespace`` on the WAN subnet."""
    out = subprocess.run(["ip", "netns", "exec", namespace, "ip", "-o", "-4", "addr"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if ipaddress.ip_interface(fields[3]).ip in WAN:
            return fields[1].split("@")[0]
    raise AssertionError(f"no WAN interface in {namespace}:\n{out}")


def test_a_cut_gateway_link_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("COC_LIVENESS_MS", "1500")
    name = f"failover-{os.getpid()}"
    bed = coc.testbed.up("two-sites-ha", name=name)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coc.launcher.cli", "--testbed", name, "-n", "4", str(TRAFFIC),
             "--pid-dir", str(tmp_path), "--seconds", "5"],
            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + scaled(30)
            while len(list(tmp_path.glob("*.json"))) < 4:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
            time.sleep(random.Random(7).uniform(0.3, 1.0))
            namespace = f"coc:{name}:a-gw1"
            subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set",
                            _wan_interface(namespace), "down"], check=True)
            try:
                out, err = proc.communicate(timeout=scaled(90))
            except subprocess.TimeoutExpired as hung:   # what every rank waits for (watchdog)
                err = hung.stderr.decode(errors="replace") if isinstance(hung.stderr, bytes) \
                    else hung.stderr
                pytest.fail(f"the job did not end; coc-run's stderr:\n{err}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.communicate()
    finally:
        bed.down()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    lines = [line for line in out.splitlines() if "rounds" in line]
    assert len(lines) == 4 and all(line.endswith(" 0 errors") for line in lines), out
    assert "lost (silent past the liveness timeout), seen by gateway b-gw" in err, err
