"""The ``slurm`` spawner against a real Slurm: coc-run inside ``salloc`` starts its site by srun.

A session fixture starts a one-node cluster (munged, slurmctld, slurmd; see slurm_cluster.py),
installing Debian's slurm-wlm and munge first when they are missing (root only).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from coc import topology
from coc.launcher.spawners.mpiexec import find_mpiexec
from coc.launcher.spawners.slurm import SlurmSpawner
from coc.pycommand import python_argv
from launcher_helpers import COC_RUN, assert_all_gone, program, recorded_pids, wait_for_files
from slurm_cluster import missing_reason, start_cluster
from hang_bounds import scaled

HOST = socket.gethostname().split(".")[0]
NODES = [HOST, f"{HOST}-2"]          # two slurmd on this machine

TOPOLOGY = f"""\
name: slurm-and-local
networks:
  a-lan: {{technology: ethernet, latency: 20us, bandwidth: 10Gbit/s, scope: private}}
  b-lan: {{technology: ethernet, latency: 20us, bandwidth: 10Gbit/s, scope: private}}
  wan: {{technology: wan, latency: 1ms, bandwidth: 1Gbit/s, scope: public}}
sites:
  a:
    spawner: slurm
    hosts:
      - {{name: {HOST}, slots: 1, interfaces: [a-lan]}}
      - {{name: {HOST}-2, slots: 1, interfaces: [a-lan]}}
      - {{name: a-gw, role: gateway, dedicated: true, interfaces: [a-lan, wan]}}
  b:
    hosts:
      - {{name: b1, slots: 2, interfaces: [b-lan]}}
      - {{name: b-gw, role: gateway, dedicated: true, interfaces: [b-lan, wan]}}
"""


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running one-node Slurm cluster (skips with the reason when it cannot run here)."""
    if os.geteuid() != 0:
        pytest.skip("a Slurm test cluster needs root (slurmd runs jobs as any user)")
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"), NODES,
                            partitions={"site-a": NODES[:1], "site-b": NODES[1:]})
    yield cluster
    cluster.stop()


@pytest.fixture
def topology_file(tmp_path):
    path = tmp_path / "slurm-and-local.yaml"
    path.write_text(TOPOLOGY)
    return path


def salloc(cluster, tasks, *args, nodes=(HOST,), timeout=scaled(60)):
    """Run ``coc-run ARGS`` in ``salloc`` of TASKS over ``nodes``; return the CompletedProcess."""
    try:
        return subprocess.run(
            ["salloc", f"-N{len(nodes)}", f"--nodelist={','.join(nodes)}",
             f"--ntasks-per-node={tasks // len(nodes)}", "--quiet", *COC_RUN, *map(str, args)],
            env=cluster.env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(cluster.logs(), file=sys.stderr)
        raise


def _steps_left(cluster):
    result = subprocess.run(["squeue", "-h", "-s", "-o", "%i %j"], env=cluster.env,
                            capture_output=True, text=True, timeout=scaled(10))
    return result.stdout.strip()


@pytest.mark.root
def test_coc_run_in_an_allocation_starts_its_site_through_srun(slurm, topology_file):
    result = salloc(slurm, 4, "--topology", topology_file, "--site", "a=4", "--site", "b=2",
                    "--tag-output", program("site_mpi.py"))
    assert result.returncode == 0, result.stderr + slurm.logs()
    reports = {}
    for line in result.stdout.splitlines():
        tag, _, text = line.partition(" ")
        report = json.loads(text)
        reports[report["rank"]] = (tag, report)
    assert sorted(reports) == list(range(6))
    for rank, (tag, report) in reports.items():
        assert report["got"] == {"from": (rank - 1) % 6}
        job, step = report["slurm"]
        if rank < 4:       # site a: the allocation's 4 slots on this node, inside a job step
            assert tag == f"[a/{HOST}/{rank}]"
            assert job and step is not None and step.isdigit()
        else:
            assert tag == f"[b/b1/{rank}]" and step is None
    assert reports[3][1]["stats"]["inter_site_messages"] == 1       # 3 -> 4 crossed over


@pytest.mark.root
@pytest.mark.skipif(find_spec("mpi4py") is None or find_mpiexec() is None,
                    reason="needs MPICH's mpiexec and mpi4py (pip install mpich mpi4py)")
def test_the_site_mpiexec_in_an_allocation_starts_its_ranks_as_a_slurm_step(slurm,
                                                                            topology_file):
    result = salloc(slurm, 4, "--topology", topology_file, "--site", "a=4", "--site", "b=2",
                    "--spawner", "a=mpiexec", program("site_mpi.py"))
    assert result.returncode == 0, result.stderr
    reports = sorted((json.loads(line) for line in result.stdout.splitlines()),
                     key=lambda r: r["rank"])
    assert [r["got"] for r in reports] == [{"from": (r - 1) % 6} for r in range(6)]
    for report in reports[:4]:      # MPICH's Hydra started its proxy with srun: one step
        assert report["mpi"] == [report["rank"], 4]
        assert report["slurm"][1] is not None and report["slurm"][1].isdigit()
    assert [r["stats"]["site_mpi_messages"] for r in reports] == [1, 1, 1, 0, 0, 0]


@pytest.mark.root
def test_a_batch_script_runs_coc_run_with_sbatch_wait(slurm, topology_file, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/sh
#SBATCH --nodes=1 --nodelist={HOST} --ntasks=2 --output={tmp_path}/job.out
{' '.join(COC_RUN)} --topology {topology_file} --site a=2 --site b=1 --tag-output \\
    {program("site_mpi.py")} 1 5
echo "coc-run exited with $?"
""")
    result = subprocess.run(["sbatch", "--wait", "--quiet", str(script)], env=slurm.env,
                            capture_output=True, text=True, timeout=scaled(60))
    output = (tmp_path / "job.out").read_text()
    assert result.returncode == 0, result.stderr + output
    assert f"coc-run: rank 1 (site a, host {HOST}) exited with code 5" in output
    assert output.rstrip().endswith("coc-run exited with 5")


@pytest.mark.root
def test_a_site_over_two_nodes_runs_each_node_as_a_job_step(slurm, topology_file):
    result = salloc(slurm, 4, "--topology", topology_file, "--site", "a=4", "--site", "b=2",
                    "--tag-output", program("site_mpi.py"), nodes=NODES)
    assert result.returncode == 0, result.stderr + slurm.logs()
    steps = {}
    for line in result.stdout.splitlines():
        tag, _, text = line.partition(" ")
        report = json.loads(text)
        rank = report["rank"]
        assert report["got"] == {"from": (rank - 1) % 6}
        if rank < 4:          # SLURM_TASKS_PER_NODE=2(x2): ranks 0-1 on the first node
            node = NODES[rank // 2]
            assert tag == f"[a/{node}/{rank}]"
            steps.setdefault(node, set()).add(report["slurm"][1])
    assert len(steps[NODES[0]]) == len(steps[NODES[1]]) == 1      # one step per node
    assert steps[NODES[0]] != steps[NODES[1]]


@pytest.mark.root
def test_the_plan_takes_hosts_and_slots_from_the_allocation(slurm, topology_file):
    result = salloc(slurm, 3, "--topology", topology_file, "--dry-run", "true")
    assert result.returncode == 0, result.stderr
    assert "hosts from: slurm job " in result.stdout
    assert f"{HOST}; other sites from the topology" in result.stdout
    assert "site a (spawner slurm): 3 ranks" in result.stdout
    assert "site b (spawner local): 2 ranks" in result.stdout


@pytest.mark.root
def test_a_failing_rank_in_the_allocation_stops_the_job_with_its_code(slurm, topology_file,
                                                                      tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    result = salloc(slurm, 4, "--topology", topology_file, "--site", "a=4", "--site", "b=2",
                    program("rank.py"), "--pid-dir", pid_dir, "--grandchild",
                    "--exit-rank", 2, "--code", 7, "--after", 1.0)
    assert result.returncode == 7, result.stderr
    assert f"coc-run: rank 2 (site a, host {HOST}) exited with code 7" in result.stderr
    assert len(list(pid_dir.glob("*.json"))) == 6
    assert_all_gone(recorded_pids(pid_dir))
    assert _steps_left(slurm) == ""


@pytest.mark.root
def test_killing_coc_run_in_the_allocation_ends_the_step_and_its_ranks(slurm, topology_file,
                                                                       tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = subprocess.Popen(
        ["salloc", "-N1", f"--nodelist={HOST}", "-n4", "--quiet", *COC_RUN, "--topology",
         str(topology_file), "--site", "a=4", "--site", "b=2", program("rank.py"),
         "--pid-dir", str(pid_dir), "--grandchild"],
        env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_files(pid_dir, 6)
        coc_run = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                 text=True, timeout=scaled(10)).stdout.split()
        assert len(coc_run) == 1
        os.kill(int(coc_run[0]), signal.SIGKILL)
        assert_all_gone(recorded_pids(pid_dir))
        proc.communicate(timeout=scaled(20))
        assert _steps_left(slurm) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=scaled(10))


def test_outside_an_allocation_the_slurm_spawner_says_so(topology_file, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    result = subprocess.run([*COC_RUN, "--topology", str(topology_file), "-n", "1", "true"],
                            env=env, capture_output=True, text=True, timeout=scaled(30))
    assert result.returncode == 2
    assert "site a: spawner 'slurm' needs a Slurm allocation (SLURM_JOB_ID is not set)" \
        in result.stderr


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
@pytest.mark.skipif(shutil.which("srun") is None, reason="needs srun (Debian slurm-wlm)")
def test_a_site_over_two_allocated_nodes_gets_a_host_agent_step_on_the_second(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "a[1-2],b1")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x3)")
    spawner = SlurmSpawner("a", {}, topology.load("two-sites"))
    assert spawner.allocated_hosts() == ["a1", "a2"]
    assert spawner.host_agent_argv("a1") is None           # the site agent's own node
    assert spawner.host_agent_argv("a-gw") is None         # not allocated: the agent's step
    argv = spawner.host_agent_argv("a2")
    assert Path(argv[0]).name == "srun" and "--nodelist=a2" in argv
    assert argv[-4:] == python_argv("coc.launcher.agent")


BATCH_TOPOLOGY = """\
name: two-batch-sites
networks:
  a-lan: {technology: ethernet, latency: 20us, bandwidth: 10Gbit/s}
  b-lan: {technology: ethernet, latency: 20us, bandwidth: 10Gbit/s}
  wan: {technology: wan, latency: 1ms, bandwidth: 1Gbit/s, scope: public}
sites:
  a:
    hosts: [{name: a1, role: gateway, slots: 2, interfaces: [a-lan, wan]}]
  b:
    hosts: [{name: b1, role: gateway, slots: 2, interfaces: [b-lan, wan]}]
"""


def _batch_profile(tmp_path, b_batch=None):
    """Write a profile: sites a and b submit to the partitions site-a and site-b."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    sites = {site: {"scheduler": "slurm", "workdir": str(work), "callback": "127.0.0.1",
                    "batch": {"partition": f"site-{site}"}} for site in ("a", "b")}
    sites["b"]["batch"].update(b_batch or {})
    path = tmp_path / "profile.yaml"
    path.write_text(json.dumps({"sites": sites}))             # JSON is YAML
    (tmp_path / "two-batch-sites.yaml").write_text(BATCH_TOPOLOGY)
    return path, work


@pytest.mark.root
def test_batch_runs_a_two_site_job_through_real_sbatch(slurm, tmp_path):
    """One batch job per site, each in its site's partition, co-allocated, one coc job."""
    profile, work = _batch_profile(tmp_path)
    result = subprocess.run([*COC_RUN, "--batch", "--profile", str(profile), "--topology",
                             str(tmp_path / "two-batch-sites.yaml"), "--site", "a=2",
                             "--site", "b=2", program("batch_where.py")],
                            env=slurm.env, capture_output=True, text=True, cwd=tmp_path,
                            timeout=scaled(120), stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr + slurm.logs()
    where = json.loads(result.stdout)
    assert [w["site"] for w in where] == ["a", "a", "b", "b"]
    assert [w["partition"] for w in where] == ["site-a", "site-a", "site-b", "site-b"]
    assert [w["node"] for w in where] == [NODES[0]] * 2 + [NODES[1]] * 2
    assert where[0]["job"] == where[1]["job"] != where[2]["job"] == where[3]["job"]
    assert "submitted batch job" in result.stderr
    assert sorted(p.name.split("-")[-1] for p in work.glob("coc-*.sh")) == ["a.sh", "b.sh"]


@pytest.mark.root
def test_batch_cancels_every_site_when_one_never_starts(slurm, tmp_path):
    """Site b's job is held (--begin in an hour): coc-run's timeout cancels both jobs."""
    profile, _ = _batch_profile(tmp_path, {"begin": "now+1hour"})
    result = subprocess.run([*COC_RUN, "--batch", "--timeout", "20", "--profile",
                             str(profile), "--topology", str(tmp_path / "two-batch-sites.yaml"),
                             "--site", "a=1", "--site", "b=1", "true"],
                            env=slurm.env, capture_output=True, text=True, cwd=tmp_path,
                            timeout=scaled(120), stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert "site b: batch job" in result.stderr and "cancelled before it started" in \
        result.stderr, result.stderr
    queue = subprocess.run(["squeue", "-h", "-o", "%j %T"], env=slurm.env,
                           capture_output=True, text=True, timeout=scaled(10)).stdout
    assert "coc-" not in queue or "RUNNING" not in queue, queue
