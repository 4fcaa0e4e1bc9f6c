"""Where a small-message round trip's time goes: how waits end, CPU and system calls per trip.

An 8-byte ``Send``/``Recv`` ping-pong between two ranks on one host (``coc-run --site a=2``,
shared memory; ``--ranks 4``: two pairs at once, more ranks than this machine's cores),
unpinned and pinned (``taskset -c 0``), reporting observables that machine load barely
moves, per round trip and per rank:

- how the engine's waits ended (``Engine.stats()``: complete at once, while spinning,
  blocked in the poller, asleep on the futex) and the time spent spinning;
- CPU time of the whole process (rank thread and progress thread: ``time.process_time``);
- with ``--syscalls``, the system calls of the whole job per round trip (``perf stat`` on the
  kernel's syscall tracepoints: counting them does not slow the calls down, unlike
  ``--strace``, ``strace -c -f``): futex, epoll_wait, epoll_ctl, sched_yield, read, write;
- with ``--runnable``, which threads were runnable while the job ran: the driver samples
  every ~1 ms the state of every thread of the job (``/proc/PID/task/TID/stat``; the
  rank's main thread, its engine's ``coc-progress`` thread, the launcher and site agent)
  and ``/proc/loadavg``'s running count less itself and the job's threads (everything else
  on the machine), and prints how often each was runnable;
- beside them the median half round trip (which load does move).

Run from a source checkout: ``python benchmarks/waits.py [--iterations 20000] [--repeat 3]
[--pin no|yes|both] [--ranks 2] [--syscalls | --strace] [--runnable]
[--env COC_SPIN_NS=...]``. Run by
the launcher, the same file is one rank (``--rank``). The half round trip printed is rank
0's pair's.
"""

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfstat import syscall_counts

PIN = ("taskset", "-c", "0")
TIMEOUT = 300
WAIT_KEYS = ("waits_at_once", "waits_spun", "waits_polled", "waits_slept", "waits_contended",
             "waits_unspun")


def rank_main(iterations):
    """One rank: ping-pong, then rank 0 prints both ranks' figures as one JSON line."""
    import numpy as np

    import coc
    comm = coc.init()
    rank, peer = comm.rank, comm.rank ^ 1   # pairs (0, 1), (2, 3), ...
    buf = np.zeros(8, np.uint8)
    engine = comm._world.port.engine

    first, then = (comm.Send, comm.Recv) if rank % 2 == 0 else (comm.Recv, comm.Send)

    def trip():
        first(buf, peer, 1)
        then(buf, peer, 1)

    for _ in range(iterations // 10 + 10):
        trip()
    comm.Barrier()
    before, cpu0 = engine.stats(), time.process_time()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        trip()
        times.append(time.perf_counter() - t0)
    cpu, after = time.process_time() - cpu0, engine.stats()
    mine = {key: (after.get(key, 0) - before.get(key, 0)) / iterations
            for key in (*WAIT_KEYS, "spin_ns")}
    mine["cpu_us"] = cpu / iterations * 1e6
    mine["budget_ns"] = after["spin_budget_ns"]
    mine["half_rtt_us"] = statistics.median(times) / 2 * 1e6
    tenth = max(1, iterations // 10)    # does the run change mode half way?
    mine["tenths_us"] = [statistics.median(times[i:i + tenth]) / 2 * 1e6
                         for i in range(0, iterations - tenth + 1, tenth)]
    both = comm.gather(mine, 0)
    if rank == 0:
        print("RESULT " + json.dumps(both), flush=True)


def _syscalls(path):
    """Return {syscall: calls} from an ``strace -c`` summary file."""
    calls = {}
    for line in open(path):
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if m:
            calls[m.group(2)] = int(m.group(1))
    return calls


SYSCALLS = ("futex", "epoll_wait", "epoll_pwait", "epoll_ctl", "sched_yield", "read", "write",
            "sendmsg", "recvmsg", "writev", "readv", "sendto", "recvfrom")


def _job_threads(root):
    """Return {tid: role} for every thread of the process tree under ``root``: ``coc-run``,
    ``agent``, ``rankN`` (N: the order the ranks were found in), each with ``/main`` or its
    thread's name (``/coc-progress``, ...)."""
    children = collections.defaultdict(list)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                children[int(f.read().rsplit(")", 1)[1].split()[1])].append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    roles, todo, nrank = {}, [root], 0
    while todo:
        pid = todo.pop()
        todo += children[pid]
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                cmd = f.read()
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
        if "coc.launcher.cli" in cmd:
            role = "coc-run"
        elif "coc.launcher.agent" in cmd:
            role = "agent"
        elif "--rank" in cmd:
            role, nrank = f"rank{nrank}", nrank + 1
        else:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = "main" if tid == pid else f.read().strip()
            except OSError:
                continue
            roles[tid] = f"{role}/{name}"
    return roles


def _sample_runnable(proc, settle=2.0):
    """While ``proc`` runs, sample every ~2 ms which of its threads are runnable and on which
    CPU each ran last (``/proc/TID/stat`` fields 3 and 39); return ({role: fraction of
    samples runnable}, {other runnable threads on the machine: fraction}, {placement:
    fraction}), placement being whether the first two ranks' main threads were last seen
    on the same CPU ("same CPU") or not, and on the same CPU and both runnable ("same CPU,
    both runnable"): two ranks whose main threads share a CPU take turns on it."""
    time.sleep(settle)                 # past start-up and warm-up: the timed loop
    roles = _job_threads(proc.pid)
    mains = [tid for tid, role in sorted(roles.items(), key=lambda kv: kv[1])
             if role.startswith("rank") and role.endswith("/main")][:2]
    hits, others, placed = collections.Counter(), collections.Counter(), collections.Counter()
    samples = 0
    while proc.poll() is None:
        mine, where = 0, {}
        for tid, role in roles.items():
            try:
                with open(f"/proc/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            where[tid] = (fields[0], fields[36])
            if fields[0] == "R":
                hits[role] += 1
                mine += 1
        if len(mains) == 2 and all(t in where for t in mains):
            (s0, c0), (s1, c1) = where[mains[0]], where[mains[1]]
            placed["same CPU"] += c0 == c1
            placed["same CPU, both runnable"] += c0 == c1 and s0 == s1 == "R"
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        others[max(0, running - 1 - mine)] += 1    # less this sampler
        samples += 1
        time.sleep(0.002)
    samples = samples or 1
    return ({role: hits[role] / samples for role in sorted(set(roles.values()))},
            {n: c / samples for n, c in sorted(others.items())},
            {k: v / samples for k, v in placed.items()})


def run_job(pin, iterations, strace, env, perf=False, ranks=2, runnable=False):
    """Run one job of ``ranks`` ranks in ping-pong pairs; return (per-rank figures,
    {syscall: calls per round trip of one pair}, the runnable threads or None)."""
    me = [sys.executable, os.path.abspath(__file__), "--rank", "--iterations", str(iterations)]
    cmd = [sys.executable, "-m", "coc.launcher.cli", "--site", f"a={ranks}", "--timeout",
           str(TIMEOUT), *me]
    summary = None
    if strace:
        summary = tempfile.NamedTemporaryFile(suffix=".strace", delete=False).name
        cmd = ["strace", "-f", "-c", "-o", summary, *cmd]
    elif perf:
        summary = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
        events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
        cmd = ["perf", "stat", "-x,", "-o", summary, "-e", events, "--", *cmd]
    cmd = [*PIN, *cmd] if pin else cmd
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env}) as proc:
        seen = _sample_runnable(proc) if runnable else None
        stdout, stderr = proc.communicate(timeout=TIMEOUT + 60)
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            calls = {}
            if summary:
                counts = (syscall_counts(Path(summary).read_text()) if perf
                          else _syscalls(summary))
                calls = {k: v / iterations / (ranks // 2) for k, v in counts.items()
                         if k in SYSCALLS and v}
                os.unlink(summary)
            return json.loads(line[7:]), calls, seen
    raise SystemExit(f"job failed (exit {proc.returncode}):\n{stdout[-2000:]}\n"
                     f"{stderr[-2000:]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pin", choices=("no", "yes", "both"), default="both")
    parser.add_argument("--strace", action="store_true",
                        help="also count system calls with strace (slows every call down)")
    parser.add_argument("--syscalls", action="store_true",
                        help="also count the job's system calls per round trip (perf stat)")
    parser.add_argument("--ranks", type=int, default=2,
                        help="ranks on the host, in ping-pong pairs (4 on 2 cores: more "
                             "ranks than cores)")
    parser.add_argument("--runnable", action="store_true",
                        help="also sample which threads of the job (and how many others) "
                             "were runnable (give --iterations enough for a few seconds)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment for the ranks (e.g. COC_SPIN_NS=-1)")
    args = parser.parse_args(argv)
    if args.rank:
        rank_main(args.iterations)
        return
    env = dict(item.split("=", 1) for item in args.env)
    pins = {"no": [False], "yes": [True], "both": [False, True]}[args.pin]
    print(f"# {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}; {args.iterations} "
          f"round trips of 8 B; env {env or '-'}; figures per round trip, rank 0 | rank 1 | ...")
    print("pinned  half-RTT µs  at once    spun       polled     slept      contended  unspun     "
          "spin µs   CPU µs       budget µs   syscalls (both ranks)")
    for _ in range(args.repeat):
        for pin in pins:
            ranks, calls, seen = run_job(pin, args.iterations, args.strace, env,
                                         args.syscalls, args.ranks, args.runnable)

            def pair(key, scale=1.0, fmt="{:.2f}"):
                return "|".join(fmt.format(r[key] * scale) for r in ranks)
            print(f"{'yes' if pin else 'no':7} {ranks[0]['half_rtt_us']:8.1f}     "
                  f"{pair('waits_at_once'):10} {pair('waits_spun'):10} "
                  f"{pair('waits_polled'):10} {pair('waits_slept'):10} "
                  f"{pair('waits_contended'):10} {pair('waits_unspun'):10} "
                  f"{pair('spin_ns', 1e-3, '{:.1f}'):9} {pair('cpu_us', 1, '{:.1f}'):12} "
                  f"{pair('budget_ns', 1e-3, '{:.0f}'):11} "
                  + " ".join(f"{k} {v:.2f}" for k, v in sorted(calls.items())), flush=True)
            print("        half RTT µs by tenths of the run: "
                  + " ".join(f"{t:.1f}" for t in ranks[0]["tenths_us"]), flush=True)
            if seen:
                threads, others, placed = seen
                print("        runnable (share of samples): "
                      + ", ".join(f"{role} {v:.2f}" for role, v in threads.items() if v)
                      + "; other threads runnable on the machine: "
                      + ", ".join(f"{n}: {v:.2f}" for n, v in others.items())
                      + "; rank mains: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in placed.items()), flush=True)


if __name__ == "__main__":
    main()
