"""What one 8 B message costs at every process of the cross-site path, coc against the relays.

Issue 17's cross-site figures (``benchmarks/small_messages.py``) are wall-clock times, which
the other work on a 2-CPU machine moves by 2x from run to run. This benchmark counts what
load barely changes, per one-way message and per process, on the ``two-sites`` testbed
between a1 and b1:

- CPU time (``/proc/PID/task/*/schedstat``, all threads) and voluntary context switches
  (a process that blocked and was woken: its wake-ups) of every process;
- for coc ``Send``/``Recv`` and ``Isend``/``Irecv`` through the two gateway daemons
  (``coc-run --testbed --delay wan=0``), rank 0 reading every process of its job around the
  measured loop; once as is, once with send coalescing off (``COC_SEND_HOLD_NS=-1``);
- for C endpoints through two chained C byte relays (``coc_pingpong`` and ``coc_relay``, the
  PACX-MPI shape), the relays and the echo server read around the client's run, the
  client's CPU time and context switches from its exit status;
- 8 B ping-pong (each message is one half round trip) and 8 B streams (windows of 64
  non-blocking sends answered by one empty message, as ``small_messages.py``'s rate);
  unpinned and pinned to one CPU (``taskset -c 0`` on every process).

Pinned, every process shares one CPU, so the sum of the CPU column is what a message costs
the machine: the latency and the rate follow it. Run (root, a source checkout):
``python benchmarks/per_message.py [--count N] [--pin no|yes|both] [--testbed NAME]``.
Run by coc-run, the same file is a rank (``--rank MODE COUNT``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WINDOW = 64
TIMEOUT = 600
PIN = ("taskset", "-c", "0")
MODES = ("pingpong", "stream")


# -- counters of a process -------------------------------------------------------------------
def counters(pid):
    """Return ``[cpu ns, voluntary context switches]`` of process ``pid``, all threads."""
    cpu = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu += int((task / "schedstat").read_text().split()[0])
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    switches += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return [cpu, switches]


def host_of(pid):
    """Return the testbed host whose namespace ``pid`` runs in (``ip netns identify``)."""
    out = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                         text=True).stdout.split()
    return out[0].rsplit(":", 1)[-1] if out else "?"  # coc:TESTBED:HOST


def per_message(before, after, messages):
    """Return ``{cpu_us, switches}`` per message between two readings."""
    return {"cpu_us": (after[0] - before[0]) / messages / 1e3,
            "switches": (after[1] - before[1]) / messages}


# -- one rank of the coc job -----------------------------------------------------------------
def _job_processes():
    """Return ``{pid: role}`` of this job's ranks and gateway daemons (rank 0 calls it)."""
    pid = os.getpid()
    while pid > 1:  # up to the launcher
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if b"coc.launcher.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
            break
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").iterdir():
            todo += [int(c) for c in (task / "children").read_text().split()]
        cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        if b"coc.launcher" in cmd:  # the launcher and the site agents carry our arguments
            continue
        if b"coc.gateway" in cmd:
            found[p] = "gateway"
        elif b"--rank" in cmd and Path(__file__).name.encode() in cmd:
            found[p] = "rank"
    return found


def rank_main(mode, count):
    """Run ``count`` messages of ``mode``; rank 0 prints the per-message figures as JSON."""
    import numpy as np

    import coc
    comm = coc.init()
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    buf, ack = np.zeros(8, np.uint8), np.zeros(1, np.uint8)
    bufs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]

    def pingpong(n):
        for _ in range(n):
            if rank == 0:
                comm.Send(buf, peer, 1)
                comm.Recv(buf, peer, 1)
            else:
                comm.Recv(buf, peer, 1)
                comm.Send(buf, peer, 1)

    def stream(n):
        for _ in range(n // WINDOW):
            if rank == 0:
                for r in [comm.Isend(b, peer, 3) for b in bufs]:
                    r.Wait()
                comm.Recv(ack, peer, 4)
            else:
                for r in [comm.Irecv(b, peer, 3) for b in bufs]:
                    r.Wait()
                comm.Send(ack, peer, 4)

    body = pingpong if mode == "pingpong" else stream
    body(max(WINDOW, count // 10))  # warm up
    procs = _job_processes() if rank == 0 else {}
    comm.Barrier()
    before = {p: counters(p) for p in procs}
    t0 = time.perf_counter()
    body(count)
    elapsed = time.perf_counter() - t0
    comm.Barrier()
    if rank == 0:
        after = {p: counters(p) for p in procs}
        messages = 2 * count if mode == "pingpong" else count // WINDOW * WINDOW
        rows = {f"{role} {host_of(p)}": per_message(before[p], after[p], messages)
                for p, role in procs.items()}
        print("RESULT " + json.dumps({"rows": rows, "rate": messages / elapsed}), flush=True)


# -- the jobs --------------------------------------------------------------------------------
def run_coc(tb, mode, count, pin, hold=True):
    """Run the coc job on testbed ``tb``; return ``{"rows": ..., "rate": ...}``."""
    from coc.pycommand import python_argv
    cmd = [*python_argv("coc.launcher.cli"), "--topology", "two-sites", "--testbed", tb.name,
           "--delay", "wan=0", "--host", "a1:1", "--host", "b1:1", "-n", "2", "--timeout",
           str(TIMEOUT), sys.executable, os.path.abspath(__file__), "--rank", mode, str(count)]
    env = dict(os.environ, **({} if hold else {"COC_SEND_HOLD_NS": "-1"}))
    proc = subprocess.run([*PIN, *cmd] if pin else cmd, capture_output=True, text=True,
                          timeout=TIMEOUT + 60, stdin=subprocess.DEVNULL, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"coc job failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                     f"{proc.stderr[-3000:]}")


def run_relays(tb, mode, count, pin):
    """C ping-pong a1 -> relay a-gw -> relay b-gw -> b1; the same figures as :func:`run_coc`."""
    from coc.bench.engine import _line, _reap, engine_sockbuf, native_tools
    tools, prefix = native_tools(), list(PIN) if pin else []
    tuning = ["-b", str(engine_sockbuf())] if engine_sockbuf() else []
    procs = {}

    def start(host, tool, *args):
        p = tb.popen(host, [*prefix, str(tools[tool]), *tuning, *map(str, args)],
                     stdout=subprocess.PIPE, text=True)
        procs[p] = f"{'relay' if tool == 'coc_relay' else 'server'} {host}"
        return _line(p, 30).split()[1]

    try:
        b1, bgw_wan, agw_lan = tb.address("b1"), tb.address("b-gw", "wan"), tb.address("a-gw", "a-lan")
        port = start("b1", "coc_pingpong", "server", b1, 0)
        port = start("b-gw", "coc_relay", bgw_wan, 0, b1, port)
        port = start("a-gw", "coc_relay", agw_lan, 0, bgw_wan, port)
        spec = f"8:{count}" if mode == "pingpong" else f"rate:8:{count}:{WINDOW}"
        before = {p: counters(p.pid) for p in procs}
        t0 = time.perf_counter()
        client = tb.popen("a1", [*prefix, str(tools["coc_pingpong"]), *tuning, "client",
                                 agw_lan, port, spec], stdout=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(client.pid, 0)
        elapsed = time.perf_counter() - t0
        client.returncode = os.waitstatus_to_exitcode(status)
        out = client.stdout.read()
        client.stdout.close()
        if client.returncode:
            raise SystemExit(f"coc_pingpong client failed (exit {client.returncode}): {out}")
        after = {p: counters(p.pid) for p in procs}
    finally:
        for p in procs:
            _reap(p)
    # the client's own count: ITERS/10 + 2 warm-up round trips before the timed ones
    messages = 2 * (count + count // 10 + 2) if mode == "pingpong" else count
    rows = {name: per_message(before[p], after[p], messages) for p, name in procs.items()}
    rows["client a1"] = {"cpu_us": (usage.ru_utime + usage.ru_stime) / messages * 1e6,
                         "switches": usage.ru_nvcsw / messages}
    words = out.split()
    rate = (int(words[2]) / (int(words[3]) * 1e-9) if mode == "stream"
            else 1 / (2 * int(words[2]) * 1e-9))
    return {"rows": rows, "rate": rate if mode == "stream" else messages / elapsed}


# -- the report ------------------------------------------------------------------------------
ORDER = ("rank a1", "client a1", "gateway a-gw", "relay a-gw", "gateway b-gw", "relay b-gw",
         "rank b1", "server b1")


def _median(runs):
    """Median of each figure of each row over ``runs`` (a list of results)."""
    rows = {}
    for name in runs[0]["rows"]:
        rows[name] = {k: statistics.median(r["rows"][name][k] for r in runs)
                      for k in runs[0]["rows"][name]}
    return {"rows": rows, "rate": statistics.median(r["rate"] for r in runs)}


def table(title, columns):
    """Format ``{column: result}``: one line per process, CPU and switches per message."""
    lines = [title, f"{'process':>14} " + " ".join(f"{c:>24}" for c in columns),
             f"{'':>14} " + " ".join(f"{'CPU us / switches':>24}" for _ in columns)]
    names = sorted({n for res in columns.values() for n in res["rows"]},
                   key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    sums = {c: 0.0 for c in columns}
    for name in names:
        cells = []
        for c, res in columns.items():
            row = res["rows"].get(name)
            if row is None:
                cells.append(f"{'':>24}")
                continue
            sums[c] += row["cpu_us"]
            cells.append(f"{row['cpu_us']:6.2f} / {row['switches']:4.2f}".rjust(24))
        lines.append(f"{name:>14} " + " ".join(cells))
    lines.append(f"{'CPU, all':>14} " + " ".join(f"{sums[c]:6.2f} us".rjust(24) for c in columns))
    lines.append(f"{'k msg/s (wall)':>14} " + " ".join(
        f"{columns[c]['rate'] / 1e3:6.1f}".rjust(24) for c in columns))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", nargs=2, metavar=("MODE", "COUNT"), help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=20000, help="messages per run (default 20000)")
    p.add_argument("--repeat", type=int, default=3, help="runs of every job (median)")
    p.add_argument("--pin", choices=["no", "yes", "both"], default="both")
    p.add_argument("--testbed", metavar="NAME", help="an existing two-sites testbed to use")
    args = p.parse_args(argv)
    if args.rank:
        return rank_main(args.rank[0], int(args.rank[1]))
    from coc import testbed as testbeds
    load = os.getloadavg()
    start = time.monotonic()
    tb = testbeds.attach(args.testbed) if args.testbed else None
    owned = None if tb else testbeds.up("two-sites", name=f"permsg{os.getpid() % 10000}")
    tb = tb or owned
    try:
        for pin in {"no": [False], "yes": [True], "both": [False, True]}[args.pin]:
            for mode in MODES:
                runs = {"coc": [], "coc, no coalescing": [], "C, 2 relays": []}
                count = args.count if mode == "stream" else args.count // 4
                for _ in range(args.repeat):  # interleaved
                    runs["C, 2 relays"].append(run_relays(tb, mode, count, pin))
                    runs["coc"].append(run_coc(tb, mode, count, pin))
                    runs["coc, no coalescing"].append(run_coc(tb, mode, count, pin, hold=False))
                title = (f"8 B {mode}, {'pinned (taskset -c 0)' if pin else 'unpinned'}, "
                         f"per one-way message, median of {args.repeat} runs")
                print(table(title, {k: _median(v) for k, v in runs.items()}) + "\n", flush=True)
    finally:
        if owned is not None:
            owned.down()
    print(f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}; "
          f"{time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
