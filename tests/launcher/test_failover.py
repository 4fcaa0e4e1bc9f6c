"""Gateway failover under coc-run: on two-sites-ha (two gateways per site) a gateway daemon
is killed (kill -9) or stopped (SIGSTOP) at a seeded random moment while ranks stream,
ping-pong and reduce across the sites with checksums; the job completes with no error and
coc-run reports the failover on stderr. With one gateway per site (two-sites) the loss ends
the job, naming the gateway, the sites and the ranks (tests/launcher/test_failures.py).
"""

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from coc import topology
from coc.launcher.failover import gateway_loss
from coc.launcher.plan import make_plan
from hang_bounds import scaled
from launcher_helpers import gateway_pids, wait_for_files

TRAFFIC = Path(__file__).parents[1] / "faults" / "programs" / "traffic.py"
LIVENESS_MS = "1500"


@pytest.fixture(autouse=True)
def _quick_liveness(monkeypatch):
    """A liveness timeout short enough for a test, inherited by agents, ranks and daemons."""
    monkeypatch.setenv("COC_LIVENESS_MS", LIVENESS_MS)


def _gateway_pids(agents):
    """Return {site: [pids]} of the gateway daemons children of the site agents
    ``agents`` ({agent pid: site})."""
    found = {site: [] for site in agents.values()}
    for agent, pids in gateway_pids(agents).items():
        found[agents[agent]] += pids
    return found


def _start(start_coc_run, tmp_path, seconds, *options):
    """Start the traffic job on two-sites-ha (coc-run ``options`` added); return coc-run and
    {site: gateway pids}."""
    tmp_path.mkdir(exist_ok=True)
    proc = start_coc_run("--topology", "two-sites-ha", "-n", 4, *options, TRAFFIC,
                         "--pid-dir", tmp_path, "--seconds", seconds)
    wait_for_files(tmp_path, 4)
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    agents = {r["agent"]: "a" if r["rank"] < 2 else "b" for r in records}
    deadline = time.monotonic() + scaled(20)
    while sorted(map(len, (pids := _gateway_pids(agents)).values())) != [2, 2]:
        assert time.monotonic() < deadline, f"found gateway daemons {pids}"
        time.sleep(0.05)
    return proc, pids


def _finished(proc):
    try:
        out, err = proc.communicate(timeout=scaled(90))
    except subprocess.TimeoutExpired as hung:   # say what every rank waits for (watchdog)
        err = hung.stderr.decode(errors="replace") if isinstance(hung.stderr, bytes) else hung.stderr
        pytest.fail(f"the job did not end; coc-run's stderr:\n{err}")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    lines = [line for line in out.splitlines() if "rounds" in line]
    assert len(lines) == 4 and all(line.endswith(" 0 errors") for line in lines), out
    return out, err


@pytest.mark.parametrize("seed", range(6))
def test_kill_9_of_one_gateway_loses_nothing(start_coc_run, tmp_path, seed):
    rng = random.Random(seed)
    proc, pids = _start(start_coc_run, tmp_path, 2.5)
    time.sleep(rng.uniform(0.05, 1.2))
    os.kill(rng.choice(pids["a"] + pids["b"]), signal.SIGKILL)
    _, err = _finished(proc)
    assert "lost (was killed by signal 9 (SIGKILL)); traffic a<->b moves to " in err, err


def test_several_kill_points_in_one_job(start_coc_run, tmp_path):
    # one gateway of each site dies, at two seeded moments
    rng = random.Random(42)
    proc, pids = _start(start_coc_run, tmp_path, 3.5)
    for victim in (rng.choice(pids["a"]), rng.choice(pids["b"])):
        time.sleep(rng.uniform(0.2, 1.0))
        os.kill(victim, signal.SIGKILL)
    _, err = _finished(proc)
    assert err.count("traffic a<->b moves to ") == 2, err


def test_sigstopped_gateway_is_bypassed(start_coc_run, tmp_path):
    proc, pids = _start(start_coc_run, tmp_path, 5)
    time.sleep(0.5)
    stopped = pids["a"][0]
    os.kill(stopped, signal.SIGSTOP)
    try:
        _, err = _finished(proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGCONT)
    assert "lost (silent past the liveness timeout), seen by gateway " in err, err


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



def test_a_gateway_stopped_and_resumed_mid_job_reports_no_rank_lost(start_coc_run, tmp_path):
    # Stopped past the liveness timeout, the gateway is judged silent and routed around;
    # resumed, it finds its endpoints' connections closed. It dials them back and finds
    # them alive: no rank hears that another one is lost (ranks of one site talk directly,
    # with no other gateway to try), and the job ends with the right answers.
    out_dir = tmp_path / "out"
    proc, pids = _start(start_coc_run, tmp_path / "pids", 7, "--output-dir", out_dir)
    time.sleep(0.5)
    stopped = pids["a"][0]
    os.kill(stopped, signal.SIGSTOP)
    try:
        time.sleep(2.5 * int(LIVENESS_MS) / 1000)
    finally:
        os.kill(stopped, signal.SIGCONT)
    out, err = proc.communicate(timeout=scaled(90))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    lines = [(out_dir / f"rank.{r}.stdout").read_text() for r in range(4)]
    assert all(line.strip().endswith(" 0 errors") for line in lines), lines
    # the resumed gateway's log: every rank connection that ended without BYE was dialed
    # back and answered (none "lost", unless the gateway cut it itself: a frame it was
    # forwarding lost its sender, and that end sends PATH frames, not ERROR)
    path, = [p for p in out_dir.glob("gateway.*.stderr")
             if f"coc.gateway[{stopped}]" in p.read_text()]
    log = path.read_text()
    lost = [line for line in log.splitlines() if re.search(r"endpoint [0-3] \(.*\) lost: ", line)
            and "the frame being forwarded lost its sender" not in line]
    assert not lost, log
    # (the site-a ranks judged the stopped gateway and closed their connections to it, so
    # at least one dial back must have happened: both sets empty would prove nothing)
    dialed = set(re.findall(r"endpoint ([0-3]) \(.*\) ended without BYE", log))
    answered = set(re.findall(r"endpoint ([0-3]) answers a new connection", log))
    assert dialed and dialed <= {"0", "1"}, log
    assert dialed == answered, log
    stats = json.loads(path.with_suffix(".stdout").read_text())["stats"]
    assert stats["peers_dialed_back"] >= len(answered), stats
