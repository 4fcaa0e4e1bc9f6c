"""Run the test suite with two CPU-bound busy loops beside it: the suite must still pass.

    python tests/under_load.py [pytest arguments ...]

Tests must not depend on the machine's speed (docs/development.md, "Tests under load"). This
starts ``--loops`` (default 2) processes that spin without end, runs ``python -m pytest``
with the given arguments, then ends the loops (by their pids) and exits with pytest's status.
Timeouts stay as they are unless ``COC_TEST_TIMEOUT_SCALE`` is set.
"""

import argparse
import subprocess
import sys

#: What each busy loop runs: pure CPU, no memory, no I/O.
SPIN = "while True: pass"


def start_loops(count):
    """Start ``count`` busy loops; return their processes."""
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def stop_loops(loops):
    """End the busy loops started by :func:`start_loops` (by pid) and reap them."""
    for loop in loops:
        loop.kill()
    for loop in loops:
        loop.wait()


def main(argv=None):
    """Run pytest under load and return its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=2, help="busy loops (default 2)")
    args, pytest_args = parser.parse_known_args(argv)
    loops = start_loops(args.loops)
    print(f"under_load: {args.loops} busy loops running (pids "
          f"{', '.join(str(p.pid) for p in loops)})", flush=True)
    try:
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args])
    finally:
        stop_loops(loops)


if __name__ == "__main__":
    sys.exit(main())
