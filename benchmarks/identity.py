"""What endpoint identity costs: connection set-up and a small message through a gateway.

A gateway daemon (``python -m coc.gateway``, holding the job's secret) forwards between two
endpoints in this process. Variants, interleaved round-robin so drifting load hits them
alike, differ only in what the two endpoints hold:

- ``keys``: the key table a rank gets from coc-run (one key, for the gateway);
- ``secret``: the job's secret (as before identity binding; still what trusted processes
  and jobs without coc-run use).

Per round, each variant opens two fresh engines, sends one 8-byte message from one to the
other through the gateway and back (the *first exchange*: both handshakes, two with the
gateway, are in it), then times ``--pingpongs`` more 8-byte round trips on the open
connections (each frame's source is checked at the gateway and at the receiver). Prints per
variant the median and spread (min..max) of the first exchange and of the half round trip,
and the ratios keys / secret. Run: ``python benchmarks/identity.py [--rounds N]
[--pingpongs N] [--json FILE]``.
"""

import argparse
import json
import os
import statistics
import sys
import time

from coc import keys
from coc._native import engine
from coc.gatewayclient import GatewayProcess

GW, A, B = 10, 1, 2
TIMEOUT = 30.0


def _engines(secret, variant):
    if variant == "secret":
        return [engine.Engine(i, secret, listen_host="127.0.0.1") for i in (A, B)]
    return [engine.Engine(i, keys=keys.table(keys.issue(secret, i, [GW], {GW}), "bench"),
                          listen_host="127.0.0.1") for i in (A, B)]


def _round(gw, secret, variant, pingpongs):
    """Return (first exchange seconds, median half round trip seconds) for one variant."""
    a, b = _engines(secret, variant)
    try:
        gw.update(peers={A: a.address, B: b.address}, routes={A: [[A, 1]], B: [[B, 1]]})
        for eng, dest in ((a, B), (b, A)):
            eng.add_peer(GW, gw.address)
            eng.set_route(dest, [GW])
        buf = bytearray(8)
        times = []
        for i in range(pingpongs + 1):
            t0 = time.perf_counter()
            r = b.irecv(buf, A, tag=1)
            a.isend(b"8 bytes.", B, tag=1).wait(TIMEOUT)
            r.wait(TIMEOUT)
            back = a.irecv(buf, B, tag=2)
            b.isend(b"8 bytes.", A, tag=2).wait(TIMEOUT)
            back.wait(TIMEOUT)
            times.append(time.perf_counter() - t0)
        return times[0], statistics.median(times[1:]) / 2
    finally:
        a.close()
        b.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--pingpongs", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    secret = os.urandom(32)
    variants = ("keys", "secret")
    got = {v: {"first": [], "half": []} for v in variants}
    gw = GatewayProcess({"self_id": GW, "secret": secret}, timeout=TIMEOUT)
    try:
        for _ in range(args.rounds):
            for v in variants:
                first, half = _round(gw, secret, v, args.pingpongs)
                got[v]["first"].append(first)
                got[v]["half"].append(half)
    finally:
        gw.stop()
    summary = {}
    for v in variants:
        summary[v] = {k: {"median_us": statistics.median(x) * 1e6, "min_us": min(x) * 1e6,
                          "max_us": max(x) * 1e6} for k, x in got[v].items()}
        for k, s in summary[v].items():
            print(f"{v:7s} {k:6s} median {s['median_us']:9.1f} us  "
                  f"({s['min_us']:.1f} .. {s['max_us']:.1f})")
    for k in ("first", "half"):
        ratio = summary["keys"][k]["median_us"] / summary["secret"][k]["median_us"]
        summary[f"ratio_{k}"] = ratio
        print(f"keys / secret, {k}: {ratio:.2f}")
    summary["load_average"] = os.getloadavg()
    print(f"load average: {summary['load_average'][0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
