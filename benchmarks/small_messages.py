"""Small messages from Python against the references, in one run, as ratios (issue 17).

One invocation measures, unpinned and pinned (``taskset -c 0`` on every process):

- **across sites**, on the ``two-sites`` testbed (network namespaces; one it builds and takes
  down, or ``--testbed NAME``), between hosts a1 and b1:
  coc ``Send``/``Recv`` and ``send``/``recv`` through the two gateway daemons
  (``coc-run --testbed --delay wan=0``: the veths are the only latency), against C
  endpoints through two chained minimal C byte relays in the gateways' namespaces
  (PACX-MPI's shape: ``native/tools/coc_pingpong.c``, ``coc_relay.c``);
- **inside one host**: coc (``coc-run --site a=2``) against mpi4py + MPICH's shared memory
  (``mpiexec -n 2``), the same measuring code on both.

Figures: half round trip (median of the per-iteration times) from 0 B to 4 MiB, object
ping-pong (a 100-byte dict, a dict with a 1 MiB array), and the message rate of 8 B and
64 KiB messages (windows of 64 non-blocking sends answered by one empty message, as OSU's
``osu_mbw_mr``). Each job runs ``--repeat`` times (interleaved); the tables show the median
of the runs and the spread (min-max) and end with the ratios issue 17 sets targets for.

Run (root, a source checkout): ``python benchmarks/small_messages.py [--quick] [--repeat 3]
[--pin no|yes|both] [--only cross|host] [--json FILE]``. Run by a launcher, the same file is
one rank (``--rank coc|mpi``).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from pingpongs import median_half_round_trip, message_object
from roundtrips import buffer_round_trip, object_round_trip

SIZES = [0, 8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20]
QUICK_SIZES = [0, 8, 4096, 65536, 1 << 20, 4 << 20]
RATE_SIZES = [8, 65536]
WINDOW = 64
OBJECTS = {"dict 100 B": "small", "dict + 1 MiB array": "large"}
TIMEOUT = 600
PIN = ("taskset", "-c", "0")


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


def _iterations(size, quick):
    base = 400 if quick else 2000
    return max(20, min(base, int(base * 4096 / max(size, 4096))))


def _rate_count(size, quick):
    return (WINDOW * (40 if quick else 200)) if size <= 4096 else WINDOW * (4 if quick else 20)


# -- one rank ---------------------------------------------------------------------------------
def measure(comm, wtime, quick):
    """Return ``{"latency": {size: s}, "object": {kind: s}, "rate": {size: msg/s}}``."""
    import numpy as np
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    out = {"latency": {}, "object": {}, "rate": {}}
    for size in QUICK_SIZES if quick else SIZES:
        pingpong = partial(buffer_round_trip, comm, np.zeros(size, np.uint8), rank, peer)
        out["latency"][size] = median_half_round_trip(comm, wtime, rank, peer, pingpong,
                                         _iterations(size, quick))
    for title, kind in OBJECTS.items():
        objpong = partial(object_round_trip, comm, message_object(kind), rank, peer)
        out["object"][title] = median_half_round_trip(comm, wtime, rank, peer, objpong,
                                         _iterations(8 if kind == "small" else 1 << 20, quick))
    for size in RATE_SIZES:
        bufs = [np.zeros(size, np.uint8) for _ in range(WINDOW)]
        ack = np.zeros(1, np.uint8)
        count = _rate_count(size, quick)

        def window():
            if rank == 0:
                reqs = [comm.Isend(b, peer, 3) for b in bufs]
                for r in reqs:
                    r.Wait()
                comm.Recv(ack, peer, 4)
            else:
                reqs = [comm.Irecv(b, peer, 3) for b in bufs]
                for r in reqs:
                    r.Wait()
                comm.Send(ack, peer, 4)
        for _ in range(3):
            window()
        comm.Barrier()
        t0 = wtime()
        for _ in range(count // WINDOW):
            window()
        out["rate"][size] = count / (wtime() - t0)
    return out


def rank_main(kind, quick):
    """Measure as one rank of a coc or an mpi4py job; rank 0 prints the JSON result."""
    if kind == "coc":
        import coc
        comm, wtime = coc.init(), coc.Wtime
    else:
        from mpi4py import MPI
        comm, wtime = MPI.COMM_WORLD, MPI.Wtime
    result = measure(comm, wtime, quick)
    comm.Barrier()
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)


# -- the jobs ---------------------------------------------------------------------------------
def _parse(stdout, what, proc):
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            raw = json.loads(line[7:])
            return {"latency": {int(k): v for k, v in raw["latency"].items()},
                    "object": raw["object"],
                    "rate": {int(k): v for k, v in raw["rate"].items()}}
    raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{stdout[-3000:]}\n"
                     f"{proc.stderr[-3000:]}")


def run_rank_job(kind, pin, quick, testbed=None):
    """Run the two-rank job: coc across sites (``testbed``), coc on one host, or mpi4py."""
    from coc.pycommand import python_argv
    me = [sys.executable, os.path.abspath(__file__), "--rank",
          "coc" if kind != "mpi" else "mpi", *(["--quick"] if quick else [])]
    if kind == "mpi":
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", "2", *me]
    elif testbed:
        cmd = [*python_argv("coc.launcher.cli"), "--topology", "two-sites",
               "--testbed", testbed, "--delay", "wan=0", "--host", "a1:1", "--host", "b1:1",
               "-n", "2", "--timeout", str(TIMEOUT), *me]
    else:
        cmd = [*python_argv("coc.launcher.cli"), "--site", "a=2", "--timeout",
               str(TIMEOUT), *me]
    cmd = [*PIN, *cmd] if pin else cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 60,
                          stdin=subprocess.DEVNULL)
    return _parse(proc.stdout, " ".join(cmd[:8]), proc)


def run_relay_chain(tb, pin, quick):
    """C ping-pong a1 -> relay on a-gw -> relay on b-gw -> b1, as ``measure`` returns it."""
    from coc.bench.engine import _line, _reap, engine_sockbuf, native_tools
    tools = native_tools()
    prefix = list(PIN) if pin else []
    sockbuf = engine_sockbuf()
    tuning = ["-b", str(sockbuf)] if sockbuf else []
    procs = []

    def start(host, tool, *args):
        procs.append(tb.popen(host, [*prefix, str(tools[tool]), *tuning, *map(str, args)],
                              stdout=subprocess.PIPE, text=True))
        return _line(procs[-1], 30).split()[1]

    sizes = QUICK_SIZES if quick else SIZES
    specs = [f"{s}:{_iterations(s, quick)}" for s in sizes]
    specs += [f"rate:{s}:{_rate_count(s, quick)}:{WINDOW}" for s in RATE_SIZES]
    try:
        b1, bgw_wan = tb.address("b1"), tb.address("b-gw", "wan")
        agw_lan = tb.address("a-gw", "a-lan")
        port = start("b1", "coc_pingpong", "server", b1, 0)
        port = start("b-gw", "coc_relay", bgw_wan, 0, b1, port)
        port = start("a-gw", "coc_relay", agw_lan, 0, bgw_wan, port)
        out = tb.exec("a1", [*prefix, str(tools["coc_pingpong"]), *tuning, "client", agw_lan,
                             port, *specs], capture_output=True, text=True, timeout=TIMEOUT,
                      check=True).stdout
    finally:
        for p in reversed(procs):
            _reap(p)
    result = {"latency": {}, "object": {}, "rate": {}}
    for line in out.splitlines():
        words = line.split()
        if words[0] == "rate":
            result["rate"][int(words[1])] = int(words[2]) / (int(words[3]) * 1e-9)
        else:
            result["latency"][int(words[0])] = int(words[2]) * 1e-9
    return result


# -- the report -------------------------------------------------------------------------------
def _median_runs(runs):
    """Return ``{section: {key: (median, min, max)}}`` over a list of results."""
    out = {}
    for section in ("latency", "object", "rate"):
        keys = runs[0][section].keys()
        out[section] = {k: (statistics.median(r[section][k] for r in runs),
                            min(r[section][k] for r in runs),
                            max(r[section][k] for r in runs)) for k in keys}
    return out


def _cell(v, scale, fmt):
    med, lo, hi = v
    return f"{fmt.format(med * scale)} ({fmt.format(lo * scale)}-{fmt.format(hi * scale)})"


def table(columns, title):
    """Format ``{column title: medians}`` as latency, object and rate tables."""
    names = list(columns)
    lines = [title, "", "half round trip, µs: median (min-max of the runs)",
             f"{'size':>8} " + " ".join(f"{n:>26}" for n in names)]
    sizes = sorted(set().union(*(c["latency"] for c in columns.values())))
    for s in sizes:
        lines.append(f"{_size(s):>8} " + " ".join(
            f"{_cell(columns[n]['latency'][s], 1e6, '{:.1f}') if s in columns[n]['latency'] else '-':>26}"
            for n in names))
    objs = [n for n in names if columns[n]["object"]]
    if objs:
        lines += ["", "objects (send/recv ping-pong), half round trip µs",
                  f"{'object':>20} " + " ".join(f"{n:>26}" for n in objs)]
        for k in OBJECTS:
            lines.append(f"{k:>20} " + " ".join(
                f"{_cell(columns[n]['object'][k], 1e6, '{:.1f}'):>26}" for n in objs))
    lines += ["", "message rate, k msg/s (windows of 64)",
              f"{'size':>8} " + " ".join(f"{n:>26}" for n in names)]
    for s in RATE_SIZES:
        lines.append(f"{_size(s):>8} " + " ".join(
            f"{_cell(columns[n]['rate'][s], 1e-3, '{:.0f}'):>26}" for n in names))
    return "\n".join(lines)


def ratios(cross, host):
    """Return ``[(title, value, comparison, target)]``: the targets of issue 17."""
    def ratio(a, b, measure, key):
        """Return ``a``'s median of ``measure`` at ``key`` over ``b``'s."""
        return a[measure][key][0] / b[measure][key][0]

    out = []
    if cross:
        coc, chain = cross["coc"], cross["chain"]
        out += [("across sites, 8 B latency: coc Send / 2 relays",
                 ratio(coc, chain, "latency", 8), "<=", 1.0),
                ("across sites, 8 B rate: coc / 2 relays",
                 ratio(coc, chain, "rate", 8), ">=", 1.0)]
    if host:
        coc, mpi = host["coc"], host["mpi"]
        out += [("one host, 8 B latency: coc / MPICH", ratio(coc, mpi, "latency", 8), "<=", 1.5),
                ("one host, 8 B rate: coc / MPICH", ratio(coc, mpi, "rate", 8), ">=", 0.7),
                ("one host, 1 MiB bandwidth: coc / MPICH",     # time ratio, inverted
                 ratio(mpi, coc, "latency", 1 << 20), ">=", 1.0)]
        out += [(f"one host, object {k}: coc / mpi4py time", ratio(coc, mpi, "object", k),
                 "<=", 1.0) for k in OBJECTS]
    return out


def format_ratios(rows):
    lines = []
    for title, value, cmp, target in rows:
        ok = value <= target if cmp == "<=" else value >= target
        lines.append(f"{title:<48} {value:6.2f}x  (target {cmp} {target}) "
                     f"{'met' if ok else 'NOT met'}")
    return "\n".join(lines)


def run(args, progress=print):
    """Run every job of the benchmark; return ``{pin label: {"cross": ..., "host": ...}}``."""
    from coc import testbed as testbeds
    tb = owned = None
    everything = {}
    try:
        if args.only in (None, "cross"):
            if args.testbed:
                tb = testbeds.attach(args.testbed)
            else:
                owned = tb = testbeds.up("two-sites", name=f"smallmsg{os.getpid() % 10000}")
        for pin in {"no": [False], "yes": [True], "both": [False, True]}[args.pin]:
            label = "pinned (taskset -c 0)" if pin else "unpinned"
            runs = {"cross": {"coc": [], "chain": []}, "host": {"coc": [], "mpi": []}}
            for rep in range(args.repeat):
                if tb is not None:
                    progress(f"{label} run {rep + 1}/{args.repeat}: across sites")
                    runs["cross"]["chain"].append(run_relay_chain(tb, pin, args.quick))
                    runs["cross"]["coc"].append(run_rank_job("coc", pin, args.quick, tb.name))
                if args.only in (None, "host"):
                    progress(f"{label} run {rep + 1}/{args.repeat}: one host")
                    runs["host"]["coc"].append(run_rank_job("coc", pin, args.quick))
                    runs["host"]["mpi"].append(run_rank_job("mpi", pin, args.quick))
            everything[label] = {where: {k: _median_runs(v) for k, v in jobs.items() if v}
                                 for where, jobs in runs.items()}
    finally:
        if owned is not None:
            owned.down()
    return everything


def report(everything, repeat):
    """Return the whole text report."""
    parts = []
    for label, res in everything.items():
        if res["cross"]:
            parts.append(table({"C, 2 relays": res["cross"]["chain"],
                                "coc Send/Recv, 2 gw": res["cross"]["coc"]},
                               f"across sites a1 -> b1 (two-sites testbed), {label}, "
                               f"median of {repeat} runs"))
        if res["host"]:
            parts.append(table({"mpi4py + MPICH": res["host"]["mpi"],
                                "coc": res["host"]["coc"]},
                               f"one host, two ranks, {label}, median of {repeat} runs"))
        parts.append(f"ratios, {label}\n" + format_ratios(ratios(res["cross"], res["host"])))
    return "\n\n".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", choices=["coc", "mpi"], help=argparse.SUPPRESS)
    p.add_argument("--pin", choices=["no", "yes", "both"], default="both",
                   help="taskset -c 0 every process (default: both ways)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    p.add_argument("--repeat", type=int, default=3, help="runs of every job (median)")
    p.add_argument("--only", choices=["cross", "host"], help="one half of the benchmark")
    p.add_argument("--testbed", metavar="NAME", help="an existing two-sites testbed to use")
    p.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = p.parse_args(argv)
    if args.rank:
        return rank_main(args.rank, args.quick)
    start = time.monotonic()
    load = os.getloadavg()
    everything = run(args, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(report(everything, args.repeat))
    print(f"\nload average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; "
          f"{time.monotonic() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
