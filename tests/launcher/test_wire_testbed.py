"""Encrypted and compressed WAN hops (docs/topology.md "Encryption and compression").

The plan gives each engine the record layer of the hops whose network is marked, and only
those; on the testbed a two-site job runs with its WAN marked, while a raw AF_PACKET socket
inside gateway a-gw's namespace captures its WAN interface: the payload's plaintext marker
crosses the WAN readable without encryption and never with it; compression moves fewer
bytes over the WAN than the payload holds (the gateways' record counters and the capture).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import warnings

import pytest
import yaml

from coc.errors import TopologyWarning
from coc.launcher.plan import make_plan
from coc.topology import from_dict, load, to_dict
from hang_bounds import read_line, scaled
from launcher_helpers import program

MARKER = "coc-wan-marker-5d1c"
SIZES = [100, 70_000, 1 << 20]
CAPTURE = r"""
import socket, sys
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
# room for the whole job's traffic: a loaded machine may not schedule this reader in time,
# and a full buffer drops packets (SO_RCVBUFFORCE: root may exceed rmem_max)
sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 64 << 20)
sock.bind((sys.argv[1], 0))
sock.settimeout(0.2)
out = open(sys.argv[2], "wb")
print("capturing", flush=True)
while True:
    try:
        out.write(sock.recv(1 << 16))
    except socket.timeout:
        out.flush()
"""


def _two_sites(**wan):
    """two-sites with its WAN marked ``wan`` (encrypt, compress)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        doc = to_dict(load("two-sites"))
    doc["networks"]["wan"].update(wan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        return from_dict(doc), doc


def test_plan_marks_only_the_hops_on_marked_networks():
    G, _ = _two_sites(encrypt=True, compress="lz4")
    plan = make_plan(G, ["true"], n=4, site_counts=[("a", 2), ("b", 2)])
    gws = {g.site: g.endpoint for g in plan.gateways}
    assert plan.wire(gws["a"]) == {gws["b"]: {"encrypt": True, "compress": "lz4"}}
    assert plan.wire(gws["b"]) == {gws["a"]: {"encrypt": True, "compress": "lz4"}}
    assert all(plan.wire(p.rank) == {} for p in plan.placements)   # LAN hops stay raw
    config = plan.agent_job("a", b"s" * 32, 5)["gateways"][0]["config"]
    assert config["wire"] == {str(gws["b"]): {"encrypt": True, "compress": "lz4"}}
    plain = make_plan(_two_sites()[0], ["true"], n=4, site_counts=[("a", 2), ("b", 2)])
    assert all(plain.wire(g.endpoint) == {} for g in plain.gateways)


def _job(bed, wan, tmp):
    """Run the marker job a1 <-> b1 with the WAN marked ``wan`` while capturing a-gw's WAN.

    Returns (captured bytes, final stats of gateway a-gw).
    """
    _, doc = _two_sites(**wan)
    topo = os.path.join(tmp, "two-sites-marked.yaml")
    with open(topo, "w") as f:
        yaml.safe_dump(doc, f)
    dev = next(i["name"] for i in bed.interfaces("a-gw") if i["network"] == "wan")
    pcap = os.path.join(tmp, "wan.bytes")
    cap = bed.popen("a-gw", [sys.executable, "-c", CAPTURE, dev, pcap], stdout=subprocess.PIPE,
                    text=True)
    try:
        assert read_line(cap, 30).strip() == "capturing"
        out = os.path.join(tmp, "out")
        argv = [sys.executable, "-m", "coc.launcher.cli", "--topology", topo, "--testbed",
                bed.name, "--host", "a1:1", "--host", "b1:1", "-n", "2", "--output-dir", out,
                sys.executable, program("wire_marker.py"), MARKER,
                ",".join(str(s) for s in SIZES)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(120),
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        cap.send_signal(signal.SIGINT)
        try:
            cap.wait(scaled(30))
        except subprocess.TimeoutExpired:
            cap.kill()
            cap.wait()
        cap.stdout.close()
    for r in range(2):
        assert json.loads(open(os.path.join(out, f"rank.{r}.stdout")).read())["ok"] == len(SIZES)
    stats = json.loads(open(os.path.join(out, "gateway.a-gw.stdout")).read().splitlines()[-1])
    return open(pcap, "rb").read(), stats["stats"]


@pytest.mark.parametrize("wan", [{}, {"encrypt": True}, {"encrypt": True, "compress": "zstd"},
                                 {"compress": "lz4"}],
                         ids=["raw", "encrypt", "encrypt-zstd", "lz4"])
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the testbed's namespaces and a "
                    "packet capture (CI runs these as root)")
def test_wan_capture(two_sites_testbed, wan):
    with tempfile.TemporaryDirectory(prefix="coc-wire-") as tmp:
        captured, stats = _job(two_sites_testbed, wan, tmp)
    payload = 2 * 2 * sum(SIZES)          # each size there and back, forwarded both ways
    seen = captured.count(MARKER.encode())
    if wan.get("encrypt"):
        assert seen == 0, f"the WAN carried the plaintext marker {seen} times"
        if not wan.get("compress"):       # the capture saw the traffic: not blind
            assert len(captured) > 2 * sum(SIZES)
    elif wan.get("compress"):
        assert seen < sum(SIZES) / 1000, "compressed text should hide most markers"
    else:
        assert seen > sum(SIZES) / 100, "the raw WAN must show the marker (else the test is blind)"
    if wan:
        assert stats["record_plain_sent"] + stats["record_plain_received"] >= payload / 2
    else:
        assert stats["record_wire_sent"] == 0
    if wan.get("compress"):
        sent = stats["record_wire_sent"] + stats["record_wire_received"]
        assert sent < 0.25 * (stats["record_plain_sent"] + stats["record_plain_received"])
        assert len(captured) < payload / 2, "the capture shows the WAN moved the full payload"
