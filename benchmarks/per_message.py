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
  unpinned and pinned to one CPU (``taskset -c 0`` on every process);
- with ``--syscalls``, the system calls of every process per message (``perf stat`` on the
  kernel's ``syscalls:sys_enter_*`` tracepoints, attached to each process for the measured
  loop: counting does not slow a call down as ``strace`` does), and the packets every
  host sent on its interfaces per message (the veths' counters: frames on the wire,
  TCP acknowledgements included).

Pinned, every process shares one CPU, so the sum of the CPU column is what a message costs
the machine: the latency and the rate follow it. Run (root, a source checkout):
``python benchmarks/per_message.py [--count N] [--pin no|yes|both] [--testbed NAME]
[--syscalls] [--modes pingpong,stream]``.
Run by coc-run, the same file is a rank (``--rank MODE COUNT``).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import tempfile
from pathlib import Path

from perfstat import syscall_counts

WINDOW = 64
TIMEOUT = 600
PIN = ("taskset", "-c", "0")
MODES = ("pingpong", "stream")
# the system calls --syscalls counts (what a rank, a gateway and a relay make per message)
SYSCALLS = ("epoll_wait", "epoll_pwait", "epoll_ctl", "poll", "read", "recvfrom", "recvmsg",
            "write", "sendto", "sendmsg", "writev", "futex", "sched_yield")


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


class SyscallCount:
    """``perf stat`` attached to processes (``{pid: name}``) until :meth:`stop`."""

    def __init__(self, pids):
        events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
        self.runs = {}
        for pid, name in pids.items():
            out = tempfile.NamedTemporaryFile(prefix="permsg", suffix=".perf", delete=False).name
            self.runs[name] = (out, subprocess.Popen(
                ["perf", "stat", "-x,", "-o", out, "-e", events, "-p", str(pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)  # perf attaches

    def stop(self, messages):
        """Stop counting; return ``{name: {syscall: calls per message}}``."""
        import signal
        counts = {}
        for name, (out, proc) in self.runs.items():
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
            counts[name] = parse_perf(Path(out).read_text(), messages)
            os.unlink(out)
        return counts


def parse_perf(text, messages):
    """Return ``{syscall: calls per message}`` from ``perf stat -x,`` output."""
    return {name: calls / messages for name, calls in syscall_counts(text).items()}


def netns_of(pid):
    """Return the network namespace name of ``pid`` (``ip netns identify``), or None."""
    out = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                         text=True).stdout.split()
    return out[0] if out else None


def packets(namespaces):
    """Return ``{host: packets sent on all its interfaces}`` of testbed namespaces."""
    sent = {}
    for ns in namespaces:
        links = json.loads(subprocess.run(["ip", "-n", ns, "-s", "-j", "link"], check=True,
                                          capture_output=True, text=True).stdout)
        sent[ns.rsplit(":", 1)[-1]] = sum(link["stats64"]["tx"]["packets"] for link in links
                                          if link["ifname"] != "lo")
    return sent


def packets_per_message(before, after, messages):
    return {host: (after[host] - before[host]) / messages for host in after}


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


def rank_main(mode, count, syscalls=False):
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
    names = {p: f"{role} {host_of(p)}" for p, role in procs.items()}
    spaces = {netns_of(p) for p in procs} - {None} if syscalls else set()
    perf = SyscallCount(names) if syscalls and rank == 0 else None
    comm.Barrier()
    before, sent = {p: counters(p) for p in procs}, packets(spaces)
    t0 = time.perf_counter()
    body(count)
    elapsed = time.perf_counter() - t0
    comm.Barrier()
    if rank == 0:
        after = {p: counters(p) for p in procs}
        messages = 2 * count if mode == "pingpong" else count // WINDOW * WINDOW
        rows = {names[p]: per_message(before[p], after[p], messages) for p in procs}
        result = {"rows": rows, "rate": messages / elapsed}
        if perf:
            result["packets"] = packets_per_message(sent, packets(spaces), messages)
            for name, calls in perf.stop(messages).items():
                rows[name]["syscalls"] = calls
        print("RESULT " + json.dumps(result), flush=True)


# -- the jobs --------------------------------------------------------------------------------
def run_coc(tb, mode, count, pin, hold=True, syscalls=False):
    """Run the coc job on testbed ``tb``; return ``{"rows": ..., "rate": ...}``."""
    from coc.pycommand import python_argv
    cmd = [*python_argv("coc.launcher.cli"), "--topology", "two-sites", "--testbed", tb.name,
           "--delay", "wan=0", "--host", "a1:1", "--host", "b1:1", "-n", "2", "--timeout",
           str(TIMEOUT), sys.executable, os.path.abspath(__file__), "--rank", mode, str(count),
           *(["--syscalls"] if syscalls else [])]
    env = dict(os.environ, **({} if hold else {"COC_SEND_HOLD_NS": "-1"}))
    proc = subprocess.run([*PIN, *cmd] if pin else cmd, capture_output=True, text=True,
                          timeout=TIMEOUT + 60, stdin=subprocess.DEVNULL, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"coc job failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                     f"{proc.stderr[-3000:]}")


def run_relays(tb, mode, count, pin, syscalls=False):
    """C ping-pong a1 -> relay a-gw -> relay b-gw -> b1; the same figures as :func:`run_coc`."""
    from coc.bench.engine import _line, _reap, engine_sockbuf, native_tools
    tools, prefix = native_tools(), list(PIN) if pin else []
    tuning = ["-b", str(engine_sockbuf())] if engine_sockbuf() else []
    procs = {}
    scratch = tempfile.TemporaryDirectory(prefix="permsg-")  # the client's perf file

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
        perf = SyscallCount({p.pid: name for p, name in procs.items()}) if syscalls else None
        spaces = {f"coc:{tb.name}:{h}" for h in ("a1", "a-gw", "b-gw", "b1")} if syscalls else ()
        before, sent = {p: counters(p.pid) for p in procs}, packets(spaces)
        t0 = time.perf_counter()
        wrap = []
        if syscalls:  # the client is counted from its start (a C program: a few calls)
            client_perf = Path(scratch.name) / "client.perf"
            wrap = ["perf", "stat", "-x,", "-o", str(client_perf), "-e",
                    ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS), "--"]
        client = tb.popen("a1", [*wrap, *prefix, str(tools["coc_pingpong"]), *tuning, "client",
                                 agw_lan, port, spec], stdout=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(client.pid, 0)
        elapsed = time.perf_counter() - t0
        sent_after = packets(spaces)
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
    result = {"rows": rows, "rate": rate if mode == "stream" else messages / elapsed}
    if syscalls:
        for name, calls in perf.stop(messages).items():
            rows[name]["syscalls"] = calls
        rows["client a1"]["syscalls"] = parse_perf(client_perf.read_text(), messages)
        result["packets"] = packets_per_message(sent, sent_after, messages)
    scratch.cleanup()
    return result


# -- the report ------------------------------------------------------------------------------
ORDER = ("rank a1", "client a1", "gateway a-gw", "relay a-gw", "gateway b-gw", "relay b-gw",
         "rank b1", "server b1")


def _median_of(dicts):
    """Median of every key over a list of dicts (nested dicts in turn; a missing key: 0)."""
    keys = {k for d in dicts for k in d}
    return {k: (_median_of([d.get(k, {}) for d in dicts])
                if any(isinstance(d.get(k), dict) for d in dicts)
                else statistics.median(d.get(k, 0) for d in dicts)) for k in keys}


def _median(runs):
    """Median of each figure of each row over ``runs`` (a list of results)."""
    return _median_of(runs)


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
    if any("packets" in res for res in columns.values()):
        lines += ["", "system calls per message (those made at least once per 100 messages)"]
        for c, res in columns.items():
            lines.append(f"  {c}:")
            for name in names:
                calls = res["rows"].get(name, {}).get("syscalls", {})
                text = ", ".join(f"{k} {v:.2f}" for k, v in sorted(calls.items()) if v >= 0.01)
                lines.append(f"{name:>16}  {text or '-'}")
            sent = res.get("packets", {})
            hosts = [h for h in ("a1", "a-gw", "b-gw", "b1") if h in sent]
            lines.append(f"{'packets sent':>16}  " + ", ".join(f"{h} {sent[h]:.2f}" for h in hosts))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", nargs=2, metavar=("MODE", "COUNT"), help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=20000, help="messages per run (default 20000)")
    p.add_argument("--repeat", type=int, default=3, help="runs of every job (median)")
    p.add_argument("--pin", choices=["no", "yes", "both"], default="both")
    p.add_argument("--testbed", metavar="NAME", help="an existing two-sites testbed to use")
    p.add_argument("--syscalls", action="store_true",
                   help="also count every process's system calls (perf stat) and the packets "
                        "every host sends, per message")
    p.add_argument("--modes", default=",".join(MODES),
                   help="which of pingpong,stream to run (default both)")
    args = p.parse_args(argv)
    if args.rank:
        return rank_main(args.rank[0], int(args.rank[1]), args.syscalls)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        p.error(f"--modes: a comma-separated list of {', '.join(MODES)}")
    if args.syscalls and shutil.which("perf") is None:
        p.error("--syscalls needs perf (linux-tools) on PATH")
    from coc import testbed as testbeds
    load = os.getloadavg()
    start = time.monotonic()
    tb = testbeds.attach(args.testbed) if args.testbed else None
    owned = None if tb else testbeds.up("two-sites", name=f"permsg{os.getpid() % 10000}")
    tb = tb or owned
    try:
        for pin in {"no": [False], "yes": [True], "both": [False, True]}[args.pin]:
            for mode in modes:
                runs = {"coc": [], "coc, no coalescing": [], "C, 2 relays": []}
                count = args.count if mode == "stream" else args.count // 4
                for _ in range(args.repeat):  # interleaved
                    runs["C, 2 relays"].append(run_relays(tb, mode, count, pin, args.syscalls))
                    runs["coc"].append(run_coc(tb, mode, count, pin, syscalls=args.syscalls))
                    runs["coc, no coalescing"].append(run_coc(tb, mode, count, pin, hold=False,
                                                              syscalls=args.syscalls))
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
