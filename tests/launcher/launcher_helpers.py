"""Helpers for launcher tests: test programs, pids, waiting for processes to end."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hang_bounds import scaled

PROGRAMS = Path(__file__).parent / "programs"
COC_RUN = [sys.executable, "-m", "coc.launcher.cli"]


def program(name):
    """Return the path of a test program in tests/launcher/programs."""
    return str(PROGRAMS / name)


def alive(pid):
    """Return True if ``pid`` is a live process (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def recorded_pids(pid_dir):
    """Return every pid the test ranks wrote to ``pid_dir`` (ranks, grandchildren, agents)."""
    pids = set()
    for path in Path(pid_dir).glob("*.json"):
        record = json.loads(path.read_text())
        pids.update(record[k] for k in ("pid", "grandchild", "agent") if k in record)
    return pids


def gateway_pids(agents):
    """Return {agent pid: [pids of the gateway daemons it started]} for ``agents`` (pids)."""
    found = {agent: [] for agent in agents}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid in found and b"coc.gateway" in cmdline:
            found[ppid].append(int(stat.parent.name))
    return found


def assert_all_gone(pids, within=10.0):
    """Fail unless every pid in ``pids`` has ended within ``within`` seconds (scaled).

    A bound against processes left behind, not a check of how fast teardown is.
    """
    deadline = time.monotonic() + scaled(within)
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    pytest.fail(f"processes left behind: {left}")


def wait_for_files(directory, count, timeout=scaled(20.0), pattern="*.json"):
    """Wait until ``directory`` holds ``count`` files matching ``pattern``."""
    deadline = time.monotonic() + timeout
    while len(list(Path(directory).glob(pattern))) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"only {len(list(Path(directory).glob(pattern)))} of {count} "
                        f"files appeared in {directory}")
        time.sleep(0.05)
