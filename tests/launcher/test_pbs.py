"""The ``pbs`` spawner, tested with PBS's environment and a test double for ``pbsdsh``.

PBS cannot run here. Inside a PBS job, coc-run finds ``PBS_NODEFILE`` and ``PBS_JOBID``: the
tests write a node file and set both. The *test double* is a fake ``pbsdsh`` on PATH that
logs the node it was asked for (``-h HOST``) and then runs the command right here, with its
stdio connected (real pbsdsh runs it on that node of the job); a second double, a fake
``ssh``, does the same for the site's gateway host b-gw, which is outside the PBS job (the
real ssh client is tested against a real sshd in test_ssh.py). Everything else is real: the
site agent here, a host agent started through "pbsdsh" for each other node, the relay
between them, ranks, gateway daemons and a message crossing both sites.
"""

import json
import os
import signal
import time

import pytest

from coc.launcher.environment import scheduler_allocation

from launcher_helpers import assert_all_gone, program, recorded_pids
from hang_bounds import scaled

FAKE_PBSDSH = """#!/bin/sh
# test double for PBS's pbsdsh: log the node, then run the command here, stdio connected
[ "$1" = "-h" ] && { echo "$2" >> "$FAKE_LOG"; shift 2; }
[ "$1" = "--" ] && shift
exec "$@"
"""
FAKE_SSH = """#!/bin/sh
# test double for ssh: log the host, then run the remote command here, stdio connected
while [ "$1" != "--" ]; do shift; done
echo "ssh $2" >> "$FAKE_LOG"
exec sh -c "$3"
"""


@pytest.fixture
def pbs_job(tmp_path):
    """The environment of a PBS job on b1 (2 slots) and b2 (2 slots), with the fake pbsdsh."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("pbsdsh", FAKE_PBSDSH), ("ssh", FAKE_SSH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("b1\nb1\nb2\nb2\n")
    profile = tmp_path / "profile.yaml"        # ranks all run here, so: loopback
    profile.write_text(json.dumps({"sites": {"b": {"spawner": "pbs", "listen": "127.0.0.1"}}}))
    log = tmp_path / "pbsdsh.log"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PBS_NODEFILE": str(nodefile),
           "PBS_JOBID": "77.pbs-server", "FAKE_LOG": str(log)}
    return {"env": env, "profile": profile, "log": log}


def test_the_node_file_is_read_by_the_one_parser(pbs_job):
    allocation = scheduler_allocation(pbs_job["env"])
    assert allocation.scheduler == "pbs" and allocation.job_id == "77.pbs-server"
    assert allocation.hosts == (("b1", 2), ("b2", 2))


def test_ranks_on_the_other_nodes_start_through_pbsdsh(coc_run, pbs_job):
    result = coc_run("--profile", pbs_job["profile"], "--site", "a=1", "--site", "b=4",
                     "--dry-run", "true", env=pbs_job["env"])
    assert "hosts from: pbs job 77.pbs-server: b[1-2]" in result.stdout, result.stderr
    result = coc_run("--profile", pbs_job["profile"], "--site", "a=1", "--site", "b=4",
                     program("show_env.py"), env=pbs_job["env"])
    assert result.returncode == 0, result.stderr
    envs = {int(e["COC_RANK"]): e for e in map(json.loads, result.stdout.splitlines())}
    assert [envs[r]["COC_HOST"] for r in range(5)] == ["a1", "b1", "b1", "b2", "b2"]
    # a host agent on the other node of the job, and one on the gateway host outside it
    assert sorted(pbs_job["log"].read_text().splitlines()) == ["b2", "ssh b-gw"]


def test_a_message_crosses_from_a_host_agents_rank(coc_run, pbs_job):
    result = coc_run("--profile", pbs_job["profile"], "--host", "a1:1", "--host", "b2:1",
                     program("engine_ring.py"), env=pbs_job["env"])
    assert result.returncode == 0, result.stderr
    got = sorted(json.loads(line)["got"] for line in result.stdout.splitlines())
    assert got == ["hello from 0", "hello from 1"]
    assert sorted(pbs_job["log"].read_text().splitlines()) == ["b2", "ssh b-gw"]


def test_a_failing_rank_on_a_host_agent_stops_everything(coc_run, pbs_job, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    result = coc_run("--profile", pbs_job["profile"], "--site", "a=1", "--site", "b=4",
                     program("rank.py"), "--pid-dir", pids, "--exit-rank", 4, "--code", 7,
                     env=pbs_job["env"])
    assert result.returncode == 7, result.stderr
    assert "rank 4 (site b, host b2) exited with code 7" in result.stderr
    assert_all_gone(recorded_pids(pids))


def test_a_host_agent_that_dies_is_a_failure_naming_the_host(start_coc_run, pbs_job,
                                                            tmp_path, monkeypatch):
    for key, value in pbs_job["env"].items():
        monkeypatch.setenv(key, value)
    pids = tmp_path / "pids"
    pids.mkdir()
    proc = start_coc_run("--profile", pbs_job["profile"], "--site", "a=1", "--site", "b=4",
                         program("rank.py"), "--pid-dir", pids)
    deadline = time.monotonic() + scaled(60)
    while len(list(pids.glob("*.json"))) < 5:
        assert time.monotonic() < deadline and proc.poll() is None, \
            f"not reached within 15 s; coc-run exit code: {proc.poll()}"
        time.sleep(0.05)
    agent = json.loads((pids / "4.json").read_text())["agent"]    # rank 4 runs on b2
    os.kill(agent, signal.SIGKILL)                  # the node's agent dies
    out, err = proc.communicate(timeout=scaled(15))
    assert proc.returncode == 1, err
    assert "host b2: its agent ended" in err
    assert_all_gone(recorded_pids(pids))


def test_outside_a_pbs_job_the_spawner_says_so(coc_run, tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text(json.dumps({"sites": {"b": {"spawner": "pbs"}}}))
    result = coc_run("--profile", profile, "-n", 2, "true",
                     env={"PBS_NODEFILE": "", "PBS_JOBID": ""})
    assert result.returncode == 2
    assert "site b: spawner 'pbs' needs a PBS job" in result.stderr
