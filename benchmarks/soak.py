"""Soak: mixed traffic across sites for a long time, with checksums and resident memory sampled.

The driver starts one job with ``coc-run`` (default ``--site a=2 --site b=2`` of the built-in
two-sites topology: every pair of ranks talks within a site and across the gateways) and lets
every rank run rounds of mixed traffic until ``--seconds`` have passed:

- point to point of every size class (8 B to 4 MiB, eager and rendezvous) around a ring that
  crosses the sites, ``Isend`` + ``Recv``, every byte checked against the pattern it must hold;
- collectives: ``Allreduce`` (exact integer sums), ``bcast`` and ``allgather`` of objects;
- objects: ``sendrecv`` of a dict holding a NumPy array and text, checked whole.

Meanwhile the driver samples ``VmRSS`` of every rank and gateway daemon of the job (found as
descendants of coc-run in ``/proc``) every ``--sample`` seconds and, at the end, reports per
process the resident memory after the first ``--warmup`` seconds and its slope (least
squares, KiB per minute), plus every rank's rounds and checksum errors. Any checksum error
makes the exit status 1.

Run: ``python benchmarks/soak.py [--seconds 600] [--sites a=2,b=2] [--sample 1]
[--warmup 60] [--pause 0] [--json FILE]``. Run by coc-run, the same file is one rank
(``--rank``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coc.pycommand import python_argv

P2P_SIZES = [8, 1024, 65536, 1 << 20, 4 << 20]
COLL_SIZE = 1 << 16                       # float64 elements of the Allreduce
OBJECT_ARRAY = 1 << 17                    # float64 elements in the object (1 MiB)


# -- the rank -------------------------------------------------------------------------------

def _pattern(np, size, round_, source):
    """Return the bytes rank ``source`` sends in round ``round_``: checkable, never all zero."""
    return ((np.arange(size, dtype=np.uint32) * 7 + round_ * 13 + source * 101) & 0xFF) \
        .astype(np.uint8)


def _round(comm, np, round_, errors):
    """Run one round of mixed traffic; count every wrong byte or value in ``errors``."""
    rank, size = comm.rank, comm.size
    right, left = (rank + 1) % size, (rank - 1) % size
    for n in P2P_SIZES:
        out = _pattern(np, n, round_, rank)
        into = np.empty(n, np.uint8)
        req = comm.Isend(out, dest=right, tag=n & 0xFFFF)
        comm.Recv(into, source=left, tag=n & 0xFFFF)
        req.Wait()
        errors["p2p"] += not np.array_equal(into, _pattern(np, n, round_, left))
    values = np.full(COLL_SIZE, rank + round_, dtype=np.float64)
    total = np.empty_like(values)
    comm.Allreduce(values, total)
    errors["allreduce"] += not np.all(total == size * round_ + size * (size - 1) // 2)
    root = round_ % size
    got = comm.bcast({"round": round_, "root": root} if rank == root else None, root=root)
    errors["bcast"] += got != {"round": round_, "root": root}
    everyone = comm.allgather((rank, round_))
    errors["allgather"] += everyone != [(r, round_) for r in range(size)]
    obj = {"from": rank, "round": round_, "text": f"rank {rank} round {round_}" * 10,
           "array": np.full(OBJECT_ARRAY, rank * 1000.0 + round_)}
    back = comm.sendrecv(obj, dest=right, source=left)
    errors["objects"] += not (back["from"] == left and back["round"] == round_
                              and back["text"] == f"rank {left} round {round_}" * 10
                              and np.all(back["array"] == left * 1000.0 + round_))


def rank_main(args):
    """One rank: rounds until the deadline (agreed by rank 0), then one JSON line."""
    import numpy as np

    import coc
    comm = coc.init()
    errors = dict.fromkeys(["p2p", "allreduce", "bcast", "allgather", "objects"], 0)
    deadline = comm.bcast(time.time() + args.seconds, root=0)
    rounds, start = 0, time.monotonic()
    while True:
        go_on = comm.bcast(time.time() < deadline, root=0)
        if not go_on:
            break
        _round(comm, np, rounds, errors)
        rounds += 1
        if args.pause:
            time.sleep(args.pause)
    print(json.dumps({"rank": comm.rank, "rounds": rounds, "errors": errors,
                      "seconds": time.monotonic() - start}), flush=True)


# -- the driver -------------------------------------------------------------------------------

def _children_of(pid):
    """Return every descendant pid of ``pid`` (from /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _role(pid):
    """Return ``"rank R"``, ``"gateway pid P"`` or None for a process of the job."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"coc.gateway" in argv:
            return f"gateway pid {pid}"
        environ = dict(item.split(b"=", 1) for item in
                       Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
    except OSError:
        return None
    if b"--rank" in argv and b"COC_RANK" in environ:
        return f"rank {environ[b'COC_RANK'].decode()}"
    return None


def _rss_kib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def slope(points):
    """Return the least-squares slope of ``[(t, y), ...]`` in y per unit of t (0 if < 2).

    Examples
    --------
    >>> slope([(0, 1), (1, 3), (2, 5)])
    2.0
    """
    if len(points) < 2:
        return 0.0
    ts, ys = [t for t, _ in points], [y for _, y in points]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return 0.0 if var == 0 else sum((t - mt) * (y - my) for t, y in points) / var


def summarize(samples, warmup):
    """Return ``{process: {...}}``: RSS after warm-up (first, last, max KiB), slope KiB/min."""
    table = {}
    for role, series in sorted(samples.items()):
        steady = [(t, kib) for t, kib in series if t >= warmup] or series
        table[role] = {"samples": len(series), "steady_samples": len(steady),
                       "rss_first_kib": steady[0][1], "rss_last_kib": steady[-1][1],
                       "rss_max_kib": max(k for _, k in series),
                       "slope_kib_per_min": round(slope(steady) * 60, 1)}
    return table


def drive(args):
    """Run the job, sample memory until it ends; return the result dict."""
    sites = [item.strip() for item in args.sites.split(",") if item.strip()]
    cmd = [*python_argv("coc.launcher.cli"), *[w for s in sites for w in ("--site", s)],
           "--timeout", str(args.seconds + 300), sys.executable, os.path.abspath(__file__),
           "--rank", "--seconds", str(args.seconds), "--pause", str(args.pause)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples, roles = {}, {}
    try:
        while proc.poll() is None:
            now = time.monotonic() - start
            for pid in _children_of(proc.pid):
                if roles.get(pid) is None:       # again until it has exec'd its program
                    roles[pid] = _role(pid)
                kib = _rss_kib(pid) if roles[pid] else None
                if kib is not None:
                    samples.setdefault(roles[pid], []).append((round(now, 2), kib))
            time.sleep(args.sample)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {"command": " ".join(cmd), "returncode": proc.returncode, "stderr": err[-4000:],
            "seconds": args.seconds, "warmup": args.warmup, "ranks": reports,
            "memory": summarize(samples, args.warmup), "samples": samples}


def format_result(result):
    """Return the result as a text table."""
    lines = [f"soak: {result['seconds']:g} s, coc-run exit {result['returncode']}"]
    for r in sorted(result["ranks"], key=lambda r: r["rank"]):
        bad = sum(r["errors"].values())
        lines.append(f"  rank {r['rank']}: {r['rounds']} rounds, {bad} checksum errors "
                     f"{'' if not bad else r['errors']}")
    lines.append(f"  resident memory after the first {result['warmup']:g} s "
                 "(KiB: first, last, max; slope KiB/min):")
    for role, m in result["memory"].items():
        lines.append(f"    {role:<14} {m['rss_first_kib']:>8} {m['rss_last_kib']:>8} "
                     f"{m['rss_max_kib']:>8}  {m['slope_kib_per_min']:>+8.1f}  "
                     f"({m['samples']} samples)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="traffic time")
    parser.add_argument("--sites", default="a=2,b=2",
                        help="coc-run --site values, comma separated")
    parser.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--warmup", type=float, default=60.0,
                        help="seconds left out of the slope")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds to sleep per round")
    parser.add_argument("--json", metavar="FILE", help="also write the full result there")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank:
        rank_main(args)
        return 0
    result = drive(args)
    print(format_result(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    errors = sum(sum(r["errors"].values()) for r in result["ranks"])
    if result["returncode"] != 0:
        print(result["stderr"], file=sys.stderr)
    return 1 if errors or result["returncode"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
