"""Flow control end to end: a flood of 64 KiB Sends towards a rank that sleeps.

Issue 12: the receiver kept every unread eager message and reached 20 GB in 60 s. With
eager credit (docs/wire-protocol.md "Credits") the sender runs out after about 1 MiB and
its next Send waits for the receiver; the gateways' windows bound what they hold. The test
samples the resident memory (VmRSS) of the sender, both gateway daemons and the receiver
from outside while the receiver sleeps, and checks each against the bound docs/engine.md
states, and that every message arrived in order.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from comm_helpers import COC_RUN, PROGRAMS

SLEEP = 20
#: docs/engine.md "Memory bounds": what a flood may add to any process on the path, and
#: what the whole process may take (a Python rank with NumPy is ~40 MiB before it sends).
GROWTH_MIB = 24
TOTAL_MIB = 96


def _rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None


def _descendants(root):
    """Pids of every live process below ``root``."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found += children.get(pid, [])
        todo += children.get(pid, [])
    return found


def _gateways(root):
    pids = []
    for pid in _descendants(root):
        try:
            if b"coc.gateway" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            pass
    return pids


@pytest.mark.timeout(SLEEP + 120)
def test_a_flood_towards_a_sleeping_rank_keeps_every_process_bounded(tmp_path):
    out = tmp_path / "out"
    cmd = [*COC_RUN, "--site", "a=1", "--site", "b=1", "--timeout", str(SLEEP + 60),
           "--output-dir", str(out), str(PROGRAMS / "flood.py"), str(SLEEP), str(tmp_path)]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL, cwd=tmp_path)
    samples = {}                      # role -> [first, max] in KiB
    try:
        deadline = time.monotonic() + SLEEP + 60
        while job.poll() is None and time.monotonic() < deadline:
            roles = {}
            for rank, role in ((0, "sender"), (1, "receiver")):
                pid_file = tmp_path / f"rank.{rank}"
                if pid_file.exists() and pid_file.read_text():
                    roles[role] = int(pid_file.read_text())
            for i, pid in enumerate(sorted(_gateways(job.pid))):
                roles[f"gateway {i}"] = pid
            for role, pid in roles.items():
                rss = _rss_kib(pid)
                if rss is not None:
                    first, top = samples.get(role, [rss, rss])
                    samples[role] = [first, max(top, rss)]
            time.sleep(0.5)
        stdout, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 0, stderr
    reports = [json.loads((out / f"rank.{r}.stdout").read_text()) for r in (0, 1)]
    assert not reports[0]["failures"] and not reports[1]["failures"], reports
    assert reports[0]["sent"] == reports[1]["received"] > 0, reports
    print("\n" + ", ".join(f"{role}: {first >> 10} -> {top >> 10} MiB"
                           for role, (first, top) in sorted(samples.items())))
    assert {"sender", "receiver", "gateway 0", "gateway 1"} <= set(samples), samples
    for role, (first, top) in samples.items():
        assert top - first < GROWTH_MIB << 10, (role, first, top)
        assert top < TOTAL_MIB << 10, (role, first, top)
    # the gateway daemons forwarded the messages (the flood crossed both sites)
    for gateway in ("a-gw", "b-gw"):
        stats = json.loads((out / f"gateway.{gateway}.stdout").read_text())["stats"]
        assert stats["frames_forwarded"] >= reports[0]["sent"], (gateway, stats)
        assert stats["forward_bytes_buffered_max"] <= 8 << 20, (gateway, stats)
