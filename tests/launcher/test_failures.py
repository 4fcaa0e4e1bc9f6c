"""coc-run's failure semantics: signals, lost launcher, dead gateways, unreachable sites."""

import asyncio
import json
import os
import signal
import sys
import time

import pytest

from coc import topology
from coc.errors import LaunchError
from coc.launcher import spawners
from coc.launcher.control import Job
from coc.launcher.output import OutputSink
from coc.launcher.plan import make_plan
from launcher_helpers import (assert_all_gone, gateway_pids, program, recorded_pids,
                              wait_for_files)
from hang_bounds import scaled


def _rank_args(pid_dir, *extra):
    return ["-n", 4, program("rank.py"), "--pid-dir", pid_dir, "--grandchild", *extra]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_stops_the_job_cleanly(start_coc_run, tmp_path, signum):
    proc = start_coc_run(*_rank_args(tmp_path))
    wait_for_files(tmp_path, 4)
    sent = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=scaled(10))
    assert time.monotonic() - sent < scaled(10)    # a bound against a hang
    assert proc.returncode == 128 + signum
    assert f"coc-run: {signal.Signals(signum).name} received, job stopped" in err
    assert out.count("ready") == 4
    assert_all_gone(recorded_pids(tmp_path))


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
def test_second_ctrl_c_kills_at_once(tmp_path):
    # The job runs here, with a grace period far longer than any machine needs to kill: on
    # coc-run's 1 s one, a loaded machine cannot tell "at once" from "after the grace", and
    # two signals sent to another process before it runs reach it as one. Here the second
    # Ctrl-C comes once the first has started the clean stop.
    grace = scaled(60)
    command = [sys.executable, *_rank_args(tmp_path, "--ignore-term")[2:]]
    plan = make_plan(topology.load("two-sites"), list(map(str, command)), n=4,
                     start_gateways=False)
    sink = OutputSink({("rank", r): (str(r), f"rank.{r}") for r in range(4)},
                      output_dir=tmp_path)
    job = Job(plan, sink, os.urandom(32), grace=grace)

    async def ctrl_c_twice():
        deadline = time.monotonic() + scaled(20)
        while len(list(tmp_path.glob("*.json"))) < 4:
            assert time.monotonic() < deadline, "the ranks did not start"
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        while not job.stopping:
            assert time.monotonic() < deadline, "the first Ctrl-C did not stop the job"
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        return time.monotonic()

    async def run():
        pressing = asyncio.ensure_future(ctrl_c_twice())
        status = await job.run(timeout=scaled(60))
        return status, await pressing

    status, sent = asyncio.run(run())
    assert time.monotonic() - sent < grace / 2         # killed, not waited out
    assert status == 130
    assert_all_gone(recorded_pids(tmp_path))


def test_ranks_that_ignore_sigterm_are_killed_after_the_grace_period(start_coc_run, tmp_path):
    proc = start_coc_run(*_rank_args(tmp_path, "--ignore-term"))
    wait_for_files(tmp_path, 4)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=scaled(10))
    assert 0.9 < time.monotonic() - sent < scaled(10)   # waited for the grace period
    assert_all_gone(recorded_pids(tmp_path))


def test_agents_end_their_ranks_when_coc_run_itself_is_killed(start_coc_run, tmp_path):
    proc = start_coc_run(*_rank_args(tmp_path))
    wait_for_files(tmp_path, 4)
    pids = recorded_pids(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=scaled(5))
    assert_all_gone(pids)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_only_gateway_dead_ends_the_job_naming_it_and_the_sites(start_coc_run, tmp_path, signum):
    proc = start_coc_run(*_rank_args(tmp_path))
    wait_for_files(tmp_path, 4)
    agents = {json.loads(p.read_text())["agent"] for p in tmp_path.glob("*.json")}
    gateways = [pid for pids in gateway_pids(agents).values() for pid in pids]
    assert len(gateways) == 2
    pids = recorded_pids(tmp_path) | set(gateways)
    os.kill(gateways[0], signum)
    _, err = proc.communicate(timeout=scaled(10))
    assert proc.returncode == 128 + signum
    name = signal.Signals(signum).name
    assert f"was killed by signal {signum} ({name}): it was the only gateway between sites a " \
           f"and b; " in err, err
    assert "(site a) and " in err and "(site b) cannot reach each other; job stopped" in err
    assert "coc-run: gateway " in err
    assert_all_gone(pids)


class _SiteThatNeverAnswers(spawners.Spawner):
    """A real agent command that fails before saying hello: a site we cannot reach."""

    kind = "unreachable"

    async def start(self, env):
        return await asyncio.create_subprocess_exec(
            "sh", "-c", "echo 'ssh: connect to host login.b: Connection refused' >&2; exit 255",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
def test_unreachable_site_fails_the_launch_and_stops_the_sites_already_started(
        monkeypatch, tmp_path):
    monkeypatch.setitem(spawners.SPAWNERS, "unreachable", _SiteThatNeverAnswers)
    G = topology.load("two-sites")
    command = [sys.executable, program("rank.py"), "--pid-dir", str(tmp_path), "--grandchild"]
    plan = make_plan(G, command, n=2, spawners={"b": "unreachable"}, start_gateways=False)
    sink = OutputSink({("rank", r): (str(r), f"rank.{r}") for r in range(2)},
                      output_dir=tmp_path)
    job = Job(plan, sink, os.urandom(32))
    with pytest.raises(LaunchError, match=r"site b: site unreachable: its agent ended "
                                          r"\(exit code 255\) before it said hello"):
        asyncio.run(job.run(timeout=scaled(20)))
    assert job.agents["a"].process.returncode == 0
    assert_all_gone(recorded_pids(tmp_path) | {job.agents["a"].process.pid})


class _SiteThatHangs(spawners.Spawner):
    """An agent command that never says hello (a login node that hangs)."""

    kind = "hangs"

    async def start(self, env):
        return await asyncio.create_subprocess_exec(
            "sleep", "300", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
def test_a_site_that_never_answers_times_out_and_its_agent_is_killed(monkeypatch, tmp_path):
    monkeypatch.setitem(spawners.SPAWNERS, "hangs", _SiteThatHangs)
    plan = make_plan(topology.load("two-sites"), ["true"], n=1, spawners={"a": "hangs"},
                     start_gateways=False)
    job = Job(plan, OutputSink({}, output_dir=tmp_path), os.urandom(32), hello_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(LaunchError, match=r"site a: site unreachable: its agent did not answer "
                                          r"within 0.5 s"):
        asyncio.run(job.run())
    assert time.monotonic() - started < scaled(30)
    assert job.agents["a"].process.returncode == -9
