"""Run the papers' applications (examples/) at their real size and tabulate time and comm share.

Each program runs under ``coc-run -n 8`` on ``two-sites`` (4 ranks a site, the traffic
between the sites through the gateway daemons) with ``--json``, ``--repeat`` times; the
table gives per application the median time, the spread (min..max), the median
communication share and the load average before its first run (a loaded machine inflates
both time and share: say so next to the figures). ``--quick`` runs the CI sizes instead.

Run: ``python benchmarks/applications.py [--quick] [--repeat N] [--only NAME ...]
[--launcher-args '--delay wan=1ms'] [--json FILE]``. ``--launcher-args`` passes options to
coc-run: ``--delay wan=1ms`` emulates two-sites' declared WAN latency in embedded mode,
``--testbed NAME`` runs in a testbed's network namespaces.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from coc.pycommand import python_argv

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: Each application's arguments at its real size (docs/examples.md); the CI size is no arguments.
REAL_SIZE = {
    "heat": ["--n", "2048", "--steps", "500"],
    "list_ranking": ["--n", "1000000"],
    "lanczos": ["--m", "96"],
    "hpl": ["--n", "4096", "--nb", "64"],
    "render": ["--width", "2048", "--height", "1536"],
    "isort": ["--class", "A"],
    "md": ["--cells", "12", "--steps", "100"],
}
TIMEOUT = 1800


def run(name, args, report, launcher_args=()):
    """Run one application once; return its JSON report."""
    cmd = [*python_argv("coc.launcher.cli"), "-n", "8", "--timeout", str(TIMEOUT),
           *launcher_args,
           sys.executable, str(EXAMPLES / f"{name}.py"), *args, "--json", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 60,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return json.loads(Path(report).read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CI sizes")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", nargs="+", choices=REAL_SIZE, default=list(REAL_SIZE))
    parser.add_argument("--json", help="write every run's report here")
    parser.add_argument("--launcher-args", default="",
                        help="more coc-run options, e.g. '--delay wan=1ms' or '--testbed NAME'")
    args = parser.parse_args()

    results = {}
    print("| application | arguments | time (median, min..max) | communication share "
          "| load average |\n|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="coc-apps-") as scratch:
        for name in args.only:
            size_args = [] if args.quick else REAL_SIZE[name]
            load = os.getloadavg()[0]
            runs = [run(name, size_args, Path(scratch) / f"{name}-{i}.json",
                        shlex.split(args.launcher_args)) for i in range(args.repeat)]
            times = [r["time"] for r in runs]
            share = statistics.median(r["comm_time"] / r["time"] for r in runs)
            results[name] = {"args": size_args, "load": load, "runs": runs,
                             "launcher_args": args.launcher_args}
            print(f"| {name} | `{' '.join(size_args) or '(CI size)'}` | "
                  f"{statistics.median(times):.2f} s ({min(times):.2f}..{max(times):.2f}) | "
                  f"{100 * share:.0f} % | {load:.1f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
