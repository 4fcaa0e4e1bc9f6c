"""``coc bench verify TOPOLOGY``: the model's predicted times against a job on the testbed.

For every ordered pair of sites and each size class, ``coc-run --testbed`` starts one rank on
the first compute host of each site (a topology of one site: its first and last host), and
the first rank measures a ping-pong with the second: half the round trip of a message of
that size, against the one-way time the model predicts with
:func:`coc.topology.routing.message_time` (the route's networks and gateways, plus the
rendezvous handshake above the eager limit; latency emulated as ``coc-run`` does under
``--testbed``). The table shows both and their ratio. The ranks also report the addresses of
the TCP connections their host's namespace holds, so a test can see which network each hop
used.

The same module is the rank program: ``coc-run ... -m coc.bench.verify --rank SIZE REPS SRC``.
"""

import argparse
import itertools
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import warnings

from coc.bench.cli import add_pattern
from coc.errors import CocError, TopologyWarning
from coc.pycommand import python_argv
from coc.topology.units import format_size, format_time, parse_size

__all__ = ["SIZES", "tcp_connections", "measure", "verify", "format_table", "register"]

#: The size of each size class verify measures: an empty-ish eager message, and a
#: rendezvous transfer of several fragments (override with ``--large``).
SIZES = {"small": 8, "large": 4 << 20}
_TIMEOUT = 120


def tcp_connections():
    """Return ``[(local ip, remote ip), ...]`` of the established TCP connections here.

    Read from ``/proc/net/tcp`` of the calling process's network namespace (in the testbed,
    one host).
    """
    found = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[3] != "01":                      # ESTABLISHED
                continue
            ips = [socket.inet_ntoa(struct.pack("<I", int(end.split(":")[0], 16)))
                   for end in fields[1:3]]
            found.append(tuple(ips))
    return sorted(set(found))


def _rank_main(size, reps, src):
    """Ping-pong between ranks 0 and 1, from the one on host ``src``; print one JSON line each."""
    import coc

    comm = coc.init()
    buf = bytearray(size)
    peer = 1 - comm.rank
    pinger = os.environ.get("COC_HOST") == src
    halves = []
    for i in range(reps + 1):                           # the first round trip warms up
        start = time.perf_counter()
        if pinger:
            comm.Send(buf, peer, tag=1)
            comm.Recv(buf, source=peer, tag=2)
        else:
            comm.Recv(buf, source=peer, tag=1)
            comm.Send(buf, peer, tag=2)
        if i:
            halves.append((time.perf_counter() - start) / 2)
    comm.barrier()
    print(json.dumps({"rank": comm.rank, "host": os.environ.get("COC_HOST"), "size": size,
                      "halves": halves if pinger else None,
                      "connections": tcp_connections()}), flush=True)


def measure(topology, testbed, src, dst, size, reps, delays=(), timeout=_TIMEOUT):
    """Run the ping-pong between hosts ``src`` and ``dst`` under ``coc-run --testbed``.

    Returns ``(rank outputs, gateway final stats by host)``; the outputs of the rank on
    ``src`` (which measured) first.
    """
    with tempfile.TemporaryDirectory(prefix="coc-verify-") as out:
        argv = [*python_argv("coc.launcher.cli"), "--topology", str(topology),
                "--testbed", testbed, "--host", f"{src}:1", "--host", f"{dst}:1", "-n", "2",
                "--output-dir", out, *(f"--delay={d}" for d in delays),
                "-m", "coc.bench.verify", "--rank", str(size), str(reps), src]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise CocError(f"coc-run {src} -> {dst} ({format_size(size)}) failed with "
                           f"{done.returncode}: {done.stderr.strip()[-2000:]}")
        ranks = sorted((json.loads(open(os.path.join(out, f"rank.{r}.stdout")).read())
                        for r in range(2)), key=lambda r: r["host"] != src)
        if [r["host"] for r in ranks] != [src, dst]:
            raise CocError(f"ranks ran on {ranks[0]['host']} and {ranks[1]['host']}, not on "
                           f"{src} and {dst}")
        gateways = {}
        for name in os.listdir(out):
            if name.startswith("gateway.") and name.endswith(".stdout"):
                text = open(os.path.join(out, name)).read().strip()
                if text:
                    gateways[name[len("gateway."):-len(".stdout")]] = json.loads(
                        text.splitlines()[-1])
        return ranks, gateways


def _pairs(G):
    """Return the ordered host pairs to measure: the first host of each site, both ways.

    A topology of one site gives its first and last host instead (across its networks).
    """
    from coc import topology

    first, last = {}, {}
    for host in topology.placement_slots(G):
        first.setdefault(G.nodes[host]["site"], host)
        last[G.nodes[host]["site"]] = host
    if len(first) == 1:
        (site,) = first
        return [(first[site], last[site]), (last[site], first[site])]
    return [(ha, hb) for a, ha in first.items() for b, hb in first.items() if a != b]


def verify(topology, testbed, sizes=None, reps=20, delays=()):
    """Measure every ordered site pair and size class; return the table's rows (dicts).

    ``topology`` is a file or library name; ``testbed`` the name of a testbed built from it.
    """
    from coc import topology as topo
    from coc.launcher.latency import override, parse_delays
    from coc.topology.routing import message_time

    sizes = dict(SIZES if sizes is None else sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = override(topo.load(topology), parse_delays(delays))
    rows = []
    for (ha, hb), (label, size) in itertools.product(_pairs(G), sizes.items()):
        route = topo.route(G, ha, hb, size)
        model = message_time(G, ha, hb, size)
        ranks, _ = measure(topology, testbed, ha, hb, size, reps, delays)
        halves = ranks[0]["halves"]
        q1, median, q3 = statistics.quantiles(halves, n=4) if len(halves) > 1 \
            else (halves[0],) * 3
        rows.append({"from": ha, "to": hb, "class": label, "size": size,
                     "route": " > ".join(route.hosts),
                     "networks": "+".join("+".join(h.networks) for h in route.hops),
                     "model": model, "median": median, "iqr": q3 - q1,
                     "ratio": median / model if model else float("inf")})
    return rows


def format_table(rows):
    """Return the rows as the text table ``coc bench verify`` prints."""
    head = (f"{'from':<8} {'to':<8} {'class':<5} {'size':>6} {'model':>9} {'measured':>9} "
            f"{'IQR':>8} {'ratio':>6}  route (networks)")
    lines = [head]
    for r in rows:
        lines.append(f"{r['from']:<8} {r['to']:<8} {r['class']:<5} "
                     f"{format_size(r['size']):>6} {format_time(r['model'], 3):>9} "
                     f"{format_time(r['median'], 3):>9} {format_time(r['iqr'], 3):>8} "
                     f"{r['ratio']:>6.2f}  {r['route']} ({r['networks']})")
    return "\n".join(lines) + "\n"


def _verify(args):
    from coc import testbed as tb

    sizes = dict(SIZES)
    if args.large:
        sizes["large"] = parse_size(args.large)
    if args.small:
        sizes["small"] = parse_size(args.small)
    if args.testbed:
        print(format_table(verify(args.topology, args.testbed, sizes, args.reps, args.delay)),
              end="")
        return 0
    with tb.up(args.topology, name=f"verify-{os.getpid()}") as bed:
        print(format_table(verify(args.topology, bed.name, sizes, args.reps, args.delay)),
              end="")
    return 0


def register(patterns):
    """Add ``coc bench verify`` to the ``coc bench`` sub-commands."""
    p = add_pattern(patterns, "verify", "model vs measured: ping-pong per site pair and size "
                    "class on the testbed", __doc__, _verify)
    p.add_argument("topology", metavar="TOPOLOGY", help="a topology file or library name")
    p.add_argument("--testbed", metavar="NAME",
                   help="a testbed of TOPOLOGY already up (default: build one, take it down)")
    p.add_argument("--reps", type=int, default=20, metavar="N", help="round trips per size")
    p.add_argument("--small", metavar="SIZE", help=f"small-class size (default "
                   f"{format_size(SIZES['small'])})")
    p.add_argument("--large", metavar="SIZE", help=f"large-class size (default "
                   f"{format_size(SIZES['large'])})")
    p.add_argument("--delay", action="append", default=[], metavar="NETWORK=TIME",
                   help="passed to coc-run --delay (and used by the model)")


if __name__ == "__main__" and sys.argv[1:2] == ["--rank"]:
    _rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
elif __name__ == "__main__":
    argparse.ArgumentParser(prog="coc bench verify").error("run it as: coc bench verify")
