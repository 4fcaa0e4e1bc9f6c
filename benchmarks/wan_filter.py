"""Encrypted and compressed WAN hops against raw ones, on the shaped two-sites testbed.

A two-rank job (rank 0 on a1, rank 1 on b1, everything between them through gateways a-gw
and b-gw) runs under ``coc-run --testbed``: rank 0 streams ``--reps`` messages of ``--size``
bytes to rank 1, which answers 8 bytes once all arrived; the time from the first send to the
answer gives the rate. The WAN (tbf-shaped) is marked differently per variant, nothing
else changes; variants run interleaved round-robin so drifting load hits them alike:

- at 1 Gbit/s, random data: ``raw`` against ``encrypt`` (AES-256-GCM);
- at 100 Mbit/s: ``raw``, ``zstd`` and ``lz4``, on compressible text and on random data.

Each run also reports the bytes the WAN carried (gateway a-gw's record counters), which load
does not change. Prints per variant the median rate, its spread (min..max) over ``--repeat``
rounds and the ratio to the same testbed's ``raw`` of the same data, plus the load average.
Emulated latency is off (``--delay wan=0``): the rate is the point. Needs root (namespaces).
Run: ``python benchmarks/wan_filter.py [--repeat N] [--size BYTES] [--only 1Gbit/s]
[--json FILE]``.

``--cpu`` measures instead what load does not change: the CPU time (user + system, both
ends) per GiB moved between two engines of this process over loopback TCP, per record layer
and data, with ``--repeat`` runs of 256 MiB each (no root needed). ``--cpu --transport unix``
does the same over a unix socket, as the one-host default's gateways are joined: there an
unmarked link moves its frames through shared memory, a marked one through records on
the socket.
The same file is the rank program (``--rank SIZE REPS DATA``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

TIMEOUT = 300
TEXT = b"coc wan filter benchmark: a line of text that compresses well, " * 16


def _payload(kind, size):
    if kind == "random":
        return bytearray(os.urandom(size))
    return bytearray((TEXT * (size // len(TEXT) + 1))[:size])


def _rank(size, reps, kind):
    """Rank 0 streams ``reps`` messages to rank 1 and prints the seconds until its answer."""
    import coc

    comm = coc.init()
    buf, ack = _payload(kind, size), bytearray(8)
    comm.barrier()
    if comm.rank == 0:
        comm.Send(buf, 1, tag=0)                 # warm-up: connections, first records
        comm.Recv(ack, source=1, tag=1)
        start = time.perf_counter()
        for _ in range(reps):
            comm.Send(buf, 1, tag=0)
        comm.Recv(ack, source=1, tag=1)
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)
    else:
        for rounds in (1, reps):
            for _ in range(rounds):
                comm.Recv(buf, source=0, tag=0)
            comm.Send(ack, 0, tag=1)
    comm.barrier()


def _topology(bandwidth, wan):
    from coc.errors import TopologyWarning
    from coc.topology import from_dict, load, to_dict

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        doc = to_dict(load("two-sites"))
    doc["networks"]["wan"].update(bandwidth=bandwidth, **wan)
    return doc


def _run(bed, doc, size, reps, kind, tmp):
    import yaml

    path = os.path.join(tmp, "topology.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    out = os.path.join(tmp, "out")
    argv = [sys.executable, "-m", "coc.launcher.cli", "--topology", path, "--testbed", bed.name,
            "--host", "a1:1", "--host", "b1:1", "-n", "2", "--output-dir", out, "--delay",
            "wan=0", sys.executable, os.path.abspath(__file__), "--rank", str(size), str(reps),
            kind]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    if done.returncode:
        raise SystemExit(f"coc-run failed ({done.returncode}): {done.stderr[-2000:]}")
    seconds = json.loads(open(os.path.join(out, "rank.0.stdout")).read())["seconds"]
    stats = json.loads(open(os.path.join(out, "gateway.a-gw.stdout")).read().splitlines()[-1])
    return seconds, stats["stats"]


# (testbed WAN bandwidth, variant name, WAN marking, data, reps per --size message)
CASES = [("1Gbit/s", "raw", {}, "random", 24),
         ("1Gbit/s", "encrypt", {"encrypt": True}, "random", 24)]
CASES += [("100Mbit/s", name, wan, data, 6) for data in ("text", "random")
          for name, wan in (("raw", {}), ("zstd", {"compress": "zstd"}),
                            ("lz4", {"compress": "lz4"}))]


CPU_CASES = [("raw", False, "none", "random"), ("encrypt", True, "none", "random"),
             ("zstd", False, "zstd", "random"), ("lz4", False, "lz4", "random"),
             ("zstd", False, "zstd", "text"), ("lz4", False, "lz4", "text"),
             ("encrypt+zstd", True, "zstd", "text"), ("raw", False, "none", "text")]


def _cpu(encrypt, compress, kind, size, transport="tcp", total=256 << 20):
    """CPU seconds per GiB for ``total`` bytes from one engine to another (``transport``:
    loopback TCP, or a unix socket with shared memory where the link is not marked)."""
    import resource

    import numpy as np

    from coc._native import engine

    def via(address):
        prefix = "unix:@" if transport == "unix" else "tcp://"
        return next(a for a in address.split() if a.startswith(prefix))

    secret = os.urandom(32)
    with engine.Engine(1, secret, listen_host="127.0.0.1") as a, \
            engine.Engine(2, secret, listen_host="127.0.0.1") as b:
        a.add_peer(2, via(b.address))
        b.add_peer(1, via(a.address))
        a.set_route(2, [2])
        b.set_route(1, [1])
        for eng, peer in ((a, 2), (b, 1)):
            eng.set_peer_wire(peer, encrypt=encrypt, compress=compress)
        data = np.frombuffer(bytes(_payload(kind, size)), dtype=np.uint8)
        out = np.empty(size, dtype=np.uint8)
        for i in range(total // size + 1):          # the first one connects
            if i == 1:
                before = resource.getrusage(resource.RUSAGE_SELF)
            r = b.irecv(out, 1)
            a.isend(data, 2).wait(TIMEOUT)
            r.wait(TIMEOUT)
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu / (total / (1 << 30))


def _cpu_table(repeat, size, transport):
    found = {}
    for _ in range(repeat):
        for name, encrypt, compress, kind in CPU_CASES:
            found.setdefault(f"{kind} {name}", []).append(
                _cpu(encrypt, compress, kind, size, transport))
    print(f"transport {transport}, load average (1 min) {os.getloadavg()[0]:.2f}")
    print(f"{'case':22} {'median CPU s/GiB':>17} {'spread':>13}")
    for key, values in found.items():
        print(f"{key:22} {statistics.median(values):17.2f} "
              f"{min(values):6.2f}..{max(values):<6.2f}")
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", nargs=3, metavar=("SIZE", "REPS", "DATA"), help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3, help="rounds over all variants")
    ap.add_argument("--size", type=int, default=4 << 20, help="bytes per message")
    ap.add_argument("--cpu", action="store_true", help="CPU time per GiB in this process")
    ap.add_argument("--transport", choices=("tcp", "unix"), default="tcp",
                    help="with --cpu: the socket between the two engines")
    ap.add_argument("--only", help="run only the testbed of this WAN bandwidth (1Gbit/s, ...)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if args.rank:
        return _rank(int(args.rank[0]), int(args.rank[1]), args.rank[2])
    if args.cpu:
        _cpu_table(args.repeat, args.size, args.transport)
        return 0
    import coc.testbed

    results = {}
    load_before = os.getloadavg()
    for bandwidth in dict.fromkeys(c[0] for c in CASES if args.only in (None, c[0])):
        doc = _topology(bandwidth, {})
        from coc.topology import from_dict
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            G = from_dict(doc)
        with coc.testbed.up(G, name=f"wanf-{os.getpid()}") as bed, \
                tempfile.TemporaryDirectory(prefix="coc-wanf-") as tmp:
            cases = [c for c in CASES if c[0] == bandwidth]
            for _ in range(args.repeat):
                for _, name, wan, data, reps in cases:
                    seconds, st = _run(bed, _topology(bandwidth, wan), args.size, reps, data, tmp)
                    entry = results.setdefault(f"{bandwidth} {data} {name}", {
                        "rates": [], "wire": [], "plain": []})
                    entry["rates"].append(reps * args.size / seconds)
                    entry["wire"].append(st["record_wire_sent"])
                    entry["plain"].append(st["record_plain_sent"])
    load_after = os.getloadavg()
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
          f"{args.repeat} rounds, {args.size} B messages")
    print(f"{'case':34} {'median MB/s':>12} {'spread':>17} {'vs raw':>7} {'WAN bytes/payload':>18}")
    for key, entry in results.items():
        rates = entry["rates"]
        raw = results[key.rsplit(" ", 1)[0] + " raw"]["rates"]
        ratio = statistics.median(rates) / statistics.median(raw)
        shrink = (statistics.median(entry["wire"]) / statistics.median(entry["plain"])
                  if entry["plain"][0] else 1.0)
        entry.update(median=statistics.median(rates), ratio=ratio, wire_ratio=shrink)
        print(f"{key:34} {entry['median'] / 1e6:12.1f} "
              f"{min(rates) / 1e6:8.1f}..{max(rates) / 1e6:<8.1f} {ratio:7.2f} {shrink:18.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": [load_before, load_after], "size": args.size,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
