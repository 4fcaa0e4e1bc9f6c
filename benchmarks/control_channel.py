"""What one control request to a gateway daemon costs: round trip, daemon CPU, system calls.

A driver (:class:`coc.gatewayclient.GatewayProcess`) asks one gateway daemon for its stats
``--requests`` times in a row, in ``--rounds`` rounds, and reports per request: the round
trip (median and min..max of the rounds' medians), the daemon's CPU time (user + system,
from ``/proc``) and, from one more run under ``strace -f -c``, the daemon's system calls
(the calls of a run without requests taken off, so start-up does not count). CPU time and
system calls barely move with the machine's load; the round trip does.

``--reference REV`` runs the same against the daemon and driver of ``coc/gateway.py`` at git
revision REV in the same run, interleaved round by round (the JSON-lines protocol before
issue 18 item 3: ``git show 33c94bf:coc/gateway.py``), and prints the ratios.

Run: ``python benchmarks/control_channel.py [--requests N] [--rounds R] [--reference REV]``.
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coc.gatewayclient import GatewayProcess

TIMEOUT = 60.0
SECRET = bytes(range(32))
ROOT = Path(__file__).resolve().parent.parent


class Current:
    """The daemon and driver of this tree."""

    name = "framed (this tree)"

    def start(self, prefix=()):
        return GatewayProcess({"self_id": 10, "secret": SECRET}, prefix=prefix,
                              timeout=TIMEOUT, stderr=subprocess.DEVNULL)

    def ask(self, gw):
        return gw.stats()


class Reference:
    """The daemon and driver of ``coc/gateway.py`` at a git revision, run from a copy."""

    def __init__(self, rev, where):
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:coc/gateway.py"],
                                check=True, capture_output=True, text=True).stdout
        (Path(where) / "gateway_reference.py").write_text(source)
        spec = importlib.util.spec_from_file_location("gateway_reference",
                                                      Path(where) / "gateway_reference.py")
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [where, *filter(None, [os.environ.get("PYTHONPATH")])])
        self.name = f"JSON lines ({rev})"

    def start(self, prefix=()):
        return self.module.GatewayProcess({"self_id": 10, "secret": SECRET},
                                          module="gateway_reference", prefix=prefix,
                                          timeout=TIMEOUT, stderr=subprocess.DEVNULL)

    def ask(self, gw):
        return gw.request({"status": True})["status"]


def _cpu_seconds(pid):
    """Return the user + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(kind, requests):
    """Return (seconds per round trip, median; daemon CPU seconds per request)."""
    gw = kind.start()
    try:
        for _ in range(20):                           # warm up
            kind.ask(gw)
        cpu = _cpu_seconds(gw.pid)
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            kind.ask(gw)
            times.append(time.perf_counter() - t0)
        cpu = _cpu_seconds(gw.pid) - cpu
    finally:
        gw.stop()
    return statistics.median(times), cpu / requests


def syscalls(kind, requests):
    """Return {system call: calls per request} of the daemon, from ``strace -f -c``."""
    counts = []
    with tempfile.TemporaryDirectory(prefix="coc-control-") as tmp:
        for n in (0, requests):
            out = Path(tmp) / f"strace.{n}"
            gw = kind.start(prefix=["strace", "-f", "-c", "-o", str(out)])
            try:
                for _ in range(n):
                    kind.ask(gw)
            finally:
                gw.stop()
            counts.append(_parse_strace(out.read_text()))
    return {call: (counts[1].get(call, 0) - counts[0].get(call, 0)) / requests
            for call in set(counts[0]) | set(counts[1])}


def _parse_strace(text):
    """Return {system call: calls} from the table ``strace -c`` writes."""
    found = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 5 and words[0][0].isdigit() and words[-1] != "total":
            found[words[-1]] = int(words[3])
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reference", metavar="REV",
                    help="also run coc/gateway.py of this git revision (e.g. 33c94bf)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="coc-control-ref-") as where:
        kinds = [Current()] + ([Reference(args.reference, where)] if args.reference else [])
        rounds = {k.name: [] for k in kinds}
        for _ in range(args.rounds):                  # interleaved: drifting load hits all
            for kind in kinds:
                rounds[kind.name].append(one_round(kind, args.requests))
        calls = ({k.name: syscalls(k, args.requests) for k in kinds}
                 if shutil.which("strace") else {})
    print(f"{args.requests} status requests per round, {args.rounds} rounds; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'daemon and driver':<26} {'round trip µs':>14} {'min..max':>14} "
          f"{'daemon CPU µs/req':>18} {'syscalls/req':>13}")
    summary = {}
    for name, rows in rounds.items():
        trip = [r[0] * 1e6 for r in rows]
        cpu = statistics.median(r[1] * 1e6 for r in rows)
        total = sum(v for v in calls.get(name, {}).values())
        summary[name] = (statistics.median(trip), cpu, total)
        print(f"{name:<26} {statistics.median(trip):>14.1f} "
              f"{min(trip):>6.1f}..{max(trip):<7.1f} {cpu:>18.1f} {total:>13.2f}")
        busy = sorted(((v, c) for c, v in calls.get(name, {}).items() if v >= 0.05),
                      reverse=True)
        if busy:
            print(f"{'':<26} " + ", ".join(f"{c} {v:.2f}" for v, c in busy))
    if len(summary) == 2:
        (_, new), (_, old) = summary.items()
        print("ratios framed / JSON lines: round trip {:.2f}, daemon CPU {:.2f}, "
              "syscalls {:.2f}".format(*(n / o if o else float("nan")
                                         for n, o in zip(new, old))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
