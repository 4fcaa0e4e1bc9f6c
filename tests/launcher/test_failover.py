"""Gateway failover under coc-run: on two-sites-ha (two gateways per site) a gateway daemon
is killed (kill -9) or stopped (SIGSTOP) at a seeded random moment while ranks stream,
ping-pong and reduce across the sites with checksums; the job completes with no error and
coc-run reports the failover on stderr. With one gateway per site (two-sites) the loss ends
the job, naming the gateway, the sites and the ranks (tests/launcher/test_failures.py).
"""

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from coc import topology
from coc.launcher.failover import gateway_loss
from coc.launcher.plan import make_plan
from hang_bounds import scaled
from launcher_helpers import wait_for_files

TRAFFIC = Path(__file__).parents[1] / "faults" / "programs" / "traffic.py"
LIVENESS_MS = "1500"


def _gateway_pids(agent_pids):
    """Return {endpoint id: pid} of the gateway daemons whose parent is an agent."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid in agent_pids and b"coc.gateway" in cmdline:
            found[int(stat.parent.name)] = stat.parent.name
    return sorted(found)


def _start(start_coc_run, tmp_path, seconds):
    os.environ["COC_LIVENESS_MS"] = LIVENESS_MS  # inherited by agents, ranks and daemons
    proc = start_coc_run("--topology", "two-sites-ha", "-n", 4, TRAFFIC, "--pid-dir", tmp_path,
                         "--seconds", seconds)
    wait_for_files(tmp_path, 4)
    agents = {json.loads(p.read_text())["agent"] for p in tmp_path.glob("*.json")}
    deadline = time.monotonic() + scaled(20)
    while len(pids := _gateway_pids(agents)) < 4:
        assert time.monotonic() < deadline, f"found gateway daemons {pids}"
        time.sleep(0.05)
    return proc, pids


def _finished(proc):
    out, err = proc.communicate(timeout=scaled(90))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    lines = [line for line in out.splitlines() if "rounds" in line]
    assert len(lines) == 4 and all(line.endswith(" 0 errors") for line in lines), out
    return out, err


@pytest.mark.parametrize("seed", range(6))
def test_kill_9_of_one_gateway_loses_nothing(start_coc_run, tmp_path, seed):
    rng = random.Random(seed)
    proc, pids = _start(start_coc_run, tmp_path, 2.5)
    time.sleep(rng.uniform(0.05, 1.2))
    os.kill(rng.choice(pids), signal.SIGKILL)
    _, err = _finished(proc)
    assert "lost (was killed by signal 9 (SIGKILL)); traffic a<->b moves to " in err, err


def test_several_kill_points_in_one_job(start_coc_run, tmp_path):
    # one gateway of each site dies, at two seeded moments
    rng = random.Random(42)
    proc, pids = _start(start_coc_run, tmp_path, 3.5)
    for victim in (rng.choice(pids[:2]), rng.choice(pids[2:])):
        time.sleep(rng.uniform(0.2, 1.0))
        os.kill(victim, signal.SIGKILL)
    _, err = _finished(proc)
    assert err.count("traffic a<->b moves to ") == 2, err


def test_sigstopped_gateway_is_bypassed(start_coc_run, tmp_path):
    proc, pids = _start(start_coc_run, tmp_path, 5)
    time.sleep(0.5)
    stopped = pids[0]
    os.kill(stopped, signal.SIGSTOP)
    try:
        _, err = _finished(proc)
    finally:
        os.kill(stopped, signal.SIGCONT)
    assert "liveness timeout" in err, err


def _plan(name, n=4):
    return make_plan(topology.load(name), ["true"], n=n)


def test_verdict_moves_traffic_when_the_set_has_a_survivor():
    plan = _plan("two-sites-ha")
    first = plan.gateways[0]
    verdict = gateway_loss(plan, first.endpoint, "was killed by signal 9 (SIGKILL)",
                           {g.endpoint for g in plan.gateways})
    assert not verdict.fatal
    assert verdict.lines == [f"coc-run: site a: gateway {first.host} lost (was killed by signal 9 "
                             f"(SIGKILL)); traffic a<->b moves to a-gw2"]


def test_verdict_is_fatal_when_the_last_member_goes():
    plan = _plan("two-sites-ha")
    a1, a2 = plan.gateways[:2]
    verdict = gateway_loss(plan, a2.endpoint, "exited with code 1",
                           {g.endpoint for g in plan.gateways} - {a1.endpoint})
    assert verdict.fatal
    assert "it was the only gateway between sites a and b; ranks 0-1 (site a) and ranks 2-3 " \
           "(site b) cannot reach each other; job stopped" in verdict.lines[0]
