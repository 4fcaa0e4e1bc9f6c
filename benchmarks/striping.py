"""One pair streaming 64 MiB across two gateways at once (striping) against each gateway alone.

On the two-gateways testbed (tests/data/topology-good/two-gateways.yaml as network
namespaces, bandwidths shaped with tbf: WAN 1 at 2 Gbit/s through gateway ga1, WAN 2 at
1 Gbit/s through ga2, one gateway gb on site b attached to both) endpoint a1 sends 64 MiB
to b1, which answers 8 bytes once all arrived; the time from the send to that answer gives
the rate. Variants, interleaved round-robin so drifting load hits them alike, differ only in
a1's large-class route to b1 (its small class, for envelopes, always goes through ga1):

- ``striped``: both gateways, weights 2:1 (the topology's bandwidths), fragment by fragment;
- ``ga1 alone``: the faster gateway only; ``ga2 alone``: the slower one only.

``--wan-scale F`` shapes the WANs at F times those rates instead. Prints per variant the median rate and its spread (min..max) over ``--repeat`` runs, each
gateway's share of the bytes, and the ratios striped / ga1 alone and striped / (ga1 + ga2
alone). Needs root (network namespaces). Run: ``python benchmarks/striping.py [--repeat N]
[--size BYTES] [--wan-scale F] [--json FILE]``.
"""

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time

import coc.testbed
from coc import protocol
from coc.topology import load
from coc.gatewayclient import GatewayProcess

TIMEOUT = 60
PORT = 7500
TOPOLOGY = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "data", "topology-good",
                        "two-gateways.yaml")
IDS = {"a1": 1, "b1": 2, "ga1": 10, "ga2": 11, "gb": 12}
VARIANTS = {"striped": [[10, 2], [11, 1]], "ga1 alone": [[10, 1]], "ga2 alone": [[11, 1]]}

# The two endpoints, driven over stdin/stdout with coc's control framing (coc.protocol). The
# sender takes one "send" message per transfer (its large route), sends SIZE bytes and
# answers the seconds until the receiver's 8-byte answer came back.
ENDPOINT = r"""
import time
import numpy as np
from coc import protocol
from coc._engine import Engine
from coc.routes import apply_routes, parse_routes
driver = protocol.MessageReader(0, "the striping benchmark's driver")
cfg = driver.read()
with Engine(cfg["id"], bytes.fromhex(cfg["secret"]), listen_host=cfg["listen"],
            port_range=(cfg["port"], cfg["port"])) as eng:
    for peer, address in cfg["peers"].items():
        eng.add_peer(int(peer), address)
    apply_routes(eng, parse_routes(cfg["routes"]))
    other, size = cfg["other"], cfg["size"]
    buf = np.empty(size, dtype=np.uint8)
    ack = bytearray(8)
    protocol.write_message(1, {"type": "ready"})
    while (order := driver.read()) is not None:
        if cfg["role"] == "receiver":
            eng.irecv(buf, source=other, tag=1).wait(timeout=60)
            eng.isend(b"received", other, tag=2).wait(timeout=60)
            continue
        eng.set_route(other, [h for h, _ in order["large"]], [w for _, w in order["large"]],
                      size_class="large")
        buf[:] = 7
        start = time.perf_counter()
        answer = eng.irecv(ack, source=other, tag=2)
        eng.isend(buf, other, tag=1).wait(timeout=60)
        answer.wait(timeout=60)
        protocol.write_message(1, {"type": "sent", "seconds": time.perf_counter() - start})
"""


def _tcp(bed, host, network=None):
    return f"tcp://{bed.address(host, network)}:{PORT}"


def _start_endpoint(bed, host, role, other, size, secret, peers, routes):
    """Start one endpoint; return its process and a reader of its answers, once ready."""
    p = bed.popen(host, [sys.executable, "-c", ENDPOINT], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE)
    protocol.write_message(p.stdin.fileno(), {
        "type": "config", "id": IDS[host], "secret": secret.hex(), "listen": "0.0.0.0",
        "port": PORT, "peers": peers, "routes": routes, "role": role, "other": IDS[other],
        "size": size})
    answers = protocol.MessageReader(p.stdout.fileno(), f"endpoint {host} (pid {p.pid})")
    if answers.read(TIMEOUT) is None:
        raise RuntimeError(f"endpoint {host} ended before it was ready (code {p.wait()})")
    return p, answers


def run(repeat, size, wan_scale=1.0):
    """Build the testbed (WAN bandwidths times ``wan_scale``), start gateways and
    endpoints, time every variant ``repeat`` times."""
    G = load(TOPOLOGY)
    for net in ("wan1", "wan2"):
        G.nodes[net]["bandwidth"] *= wan_scale
    bed = coc.testbed.up(G, name=f"stripe-bench-{os.getpid()}")
    procs = []
    try:
        secret = secrets.token_bytes(32)
        gw_cfg = {
            "ga1": ({1: _tcp(bed, "a1"), 12: _tcp(bed, "gb", "wan1")}, {1: [[1, 1]], 2: [[12, 1]]}),
            "ga2": ({1: _tcp(bed, "a1"), 12: _tcp(bed, "gb", "wan2")}, {1: [[1, 1]], 2: [[12, 1]]}),
            "gb": ({2: _tcp(bed, "b1"), 10: _tcp(bed, "ga1", "wan1"), 11: _tcp(bed, "ga2", "wan2")},
                   {2: [[2, 1]], 1: [[10, 2], [11, 1]]}),
        }
        gws = {}
        for host, (peers, routes) in gw_cfg.items():
            gws[host] = GatewayProcess({"self_id": IDS[host], "secret": secret,
                                        "listen_host": "0.0.0.0", "port_range": [PORT, PORT],
                                        "peers": peers, "routes": routes},
                                       prefix=bed.argv(host, []), timeout=TIMEOUT)
            procs.append(gws[host].proc)
        receiver, _ = _start_endpoint(bed, "b1", "receiver", "a1", size, secret,
                                      {12: _tcp(bed, "gb", "b-lan")}, {1: [[12, 1]]})
        procs.append(receiver)
        sender, sent = _start_endpoint(bed, "a1", "sender", "b1", size, secret,
                                       {10: _tcp(bed, "ga1", "a-lan"),
                                        11: _tcp(bed, "ga2", "a-lan")},
                                       {2: {"small": [[10, 1]], "large": VARIANTS["striped"]}})
        procs.append(sender)
        rates = {v: [] for v in VARIANTS}
        shares = {v: [0, 0] for v in VARIANTS}
        for rnd in range(repeat + 1):              # round 0 warms up (connections, pools)
            for variant, large in VARIANTS.items():
                before = [gws[g].stats()["bytes_forwarded"] for g in ("ga1", "ga2")]
                protocol.write_message(receiver.stdin.fileno(), {"type": "receive"})
                protocol.write_message(sender.stdin.fileno(), {"type": "send", "large": large})
                seconds = sent.read(TIMEOUT)["seconds"]
                after = [gws[g].stats()["bytes_forwarded"] for g in ("ga1", "ga2")]
                if rnd:
                    rates[variant].append(size * 8 / seconds / 1e9)
                    for k in range(2):
                        shares[variant][k] += after[k] - before[k]
        return rates, shares
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        bed.down()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--size", type=int, default=64 << 20)
    ap.add_argument("--wan-scale", type=float, default=1.0,
                    help="multiply both WANs' bandwidth (e.g. 0.25: 500 and 250 Mbit/s), to "
                         "see the shaping rather than the CPU as the limit")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rates, shares = run(args.repeat, args.size, args.wan_scale)
    med = {v: statistics.median(r) for v, r in rates.items()}
    print(f"one pair a1 -> b1, {args.size >> 20} MiB per transfer, {args.repeat} runs per "
          f"variant, WANs shaped at {2 * args.wan_scale:g} and {args.wan_scale:g} Gbit/s")
    print(f"{'variant':<12} {'median Gbit/s':>14} {'min..max':>14} {'via ga1 : ga2':>16}")
    for v, r in rates.items():
        total = sum(shares[v]) or 1
        print(f"{v:<12} {med[v]:>14.2f} {min(r):>6.2f}..{max(r):<6.2f} "
              f"{shares[v][0] / total:>8.2f} : {shares[v][1] / total:.2f}")
    print(f"striped / ga1 alone: {med['striped'] / med['ga1 alone']:.2f}; "
          f"striped / (ga1 alone + ga2 alone): "
          f"{med['striped'] / (med['ga1 alone'] + med['ga2 alone']):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rates_gbit_s": rates, "bytes_via": shares}, f, indent=1)


if __name__ == "__main__":
    main()
