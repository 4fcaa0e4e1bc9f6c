"""coc-run --batch: job scripts from launcher/ templates, submission, the relay, cancellation.

No batch system runs here, so the end-to-end tests use a stated *test double*: a fake
``sbatch`` on PATH that records its arguments, starts the job script at once in the
background (a scheduler with free nodes) and prints a job id as ``sbatch --parsable`` does,
and a fake ``scancel`` that records what it cancels; for a job of two nodes, the fake
sbatch sets Slurm's variables in the job and a fake ``srun`` runs the command here.
Everything else is real: the relay started by the site's spawner, the token, the job's agent connecting back, the ranks and
gateway daemons. A real Slurm submission is tested with the Slurm spawner's tests.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from coc.errors import LaunchError, TopologyWarning
from coc import protocol
from coc.launcher import batch
from coc.launcher.plan import make_plan
from coc.topology import load

from launcher_helpers import assert_all_gone, program
from hang_bounds import scaled

GOLDEN = Path(__file__).parents[1] / "data" / "launcher" / "batch"
SETTINGS = {"python": "/opt/coc/bin/python", "workdir": "/scratch/me/run",
            "setup": "module load python/3.11\nsource /opt/coc/bin/activate"}
BATCH = {"slurm": {"partition": "compute", "account": "proj42", "walltime": "00:20:00"},
         "pbs": {"queue": "workq", "account": "proj42", "mem": "8gb"},
         "lsf": {"queue": "normal", "project": "proj42", "walltime": "20:00"},
         "sge": {"queue": "all.q", "pe": "mpi 4", "h_vmem": "2G"}}


def _plan(scheduler):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = load("two-sites")
    settings = {"b": {**SETTINGS, "scheduler": scheduler, "batch": BATCH[scheduler]}}
    return make_plan(G, ["python", "-m", "coc", "solver.py"], site_counts=[("a", 2), ("b", 3)],
                     job_id="0123abcd", settings=settings, start_gateways=True)


@pytest.mark.parametrize("scheduler", sorted(batch.SCHEDULERS))
def test_job_scripts_match_the_golden_files(scheduler):
    plan = _plan(scheduler)
    assert batch.batch_sites(plan) == ["b"]
    text, path = batch._template("b", plan.settings["b"])
    assert path.name == f"{scheduler}.sh"
    script = batch.render_script(text, {**batch.script_values(plan, "b"),
                                        "callback": "login.b.example.org:40000",
                                        "token": "feedc0de"})
    golden = GOLDEN / f"{scheduler}.sh"
    if os.environ.get("COC_UPDATE_GOLDEN"):
        golden.write_text(script)
    assert script == golden.read_text()


def test_an_unknown_placeholder_names_the_template(tmp_path):
    template = tmp_path / "mine.sh"
    template.write_text("#!/bin/sh\n#SBATCH --qos=${qos}\necho ${HOME} $USER\n")
    plan = _plan("slurm")
    plan.settings["b"]["template"] = str(template)
    with pytest.raises(LaunchError, match=r"mine.sh: unknown placeholder \$\{qos\}"):
        batch.use_batch(plan)


def test_dry_run_prints_the_plan_and_every_job_script(coc_run, tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text(json.dumps({"sites": {"b": {"scheduler": "pbs", "workdir": "/w"}}}))
    result = coc_run("--batch", "--dry-run", "--profile", profile, "-n", 2, "true")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("placement:") < out.index("batch job for site b (pbs, template ")
    assert "submitted with: qsub):\n#!/bin/bash\n" in out
    assert "#PBS -N coc-" in out and "\ncd /w\n" in out and "site a (" not in out[
        out.index("batch job"):]


def test_batch_without_a_scheduler_is_a_clear_error(coc_run):
    result = coc_run("--batch", "-n", 2, "true")
    assert result.returncode == 2
    assert "--batch: no site names a scheduler" in result.stderr


FAKE_SBATCH = """#!/bin/sh
# test double for sbatch: log the call, run the job script now in the background, print an id
echo "sbatch $*" >> "$FAKE_LOG"
script="$2"
[ -n "$FAKE_QUEUED" ] && { echo 4242; exit 0; }     # a job that stays in the queue
[ -n "$FAKE_NODES" ] && export SLURM_JOB_ID=4242 SLURM_JOB_NODELIST="$FAKE_NODES" \
    SLURM_TASKS_PER_NODE="1(x2)"
setsid sh -c 'echo $$ > "$FAKE_LOG.job"; exec sh "$0" > "$0.out" 2>&1 < /dev/null' "$script" &
echo 4242
"""
FAKE_SRUN = """#!/bin/sh
# test double for srun inside the job: log the node, run the command here, stdio connected
while [ "${1#--}" != "$1" ]; do case "$1" in --nodelist=*) echo "srun $1" >> "$FAKE_LOG";; esac
    shift; done
exec "$@"
"""
FAKE_SCANCEL = """#!/bin/sh
echo "scancel $*" >> "$FAKE_LOG"
"""


@pytest.fixture
def fake_slurm(tmp_path):
    """A bin directory with the fake sbatch and scancel, and the profile of a batch site b."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("scancel", FAKE_SCANCEL),
                       ("srun", FAKE_SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    profile = tmp_path / "profile.yaml"
    profile.write_text(json.dumps({"sites": {"b": {
        "scheduler": "slurm", "workdir": str(work), "callback": "127.0.0.1"}}}))
    log = tmp_path / "submitted.log"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log)}
    return {"profile": profile, "log": log, "env": env, "work": work}


def test_a_batch_site_runs_once_its_job_starts(coc_run, fake_slurm):
    result = coc_run("--batch", "--profile", fake_slurm["profile"], "-n", 2,
                     program("engine_ring.py"), env=fake_slurm["env"])
    assert result.returncode == 0, result.stderr
    got = sorted(json.loads(line)["got"] for line in result.stdout.splitlines())
    assert got == ["hello from 0", "hello from 1"]        # the ring crossed both sites
    scripts = list(fake_slurm["work"].glob("coc-*-b.sh"))
    assert len(scripts) == 1
    assert fake_slurm["log"].read_text() == f"sbatch --parsable {scripts[0]}\n"
    assert scripts[0].stat().st_mode & 0o777 == 0o700      # it holds the token
    assert "submitted batch job 4242" in result.stderr
    assert "batch job 4242 started" in result.stderr
    job = int(Path(f"{fake_slurm['log']}.job").read_text())
    assert_all_gone([job])                                   # the job ended with the run


def test_a_two_node_batch_job_starts_its_second_node_through_srun(coc_run, fake_slurm):
    result = coc_run("--batch", "--profile", fake_slurm["profile"], "--host", "a1:1",
                     "--host", "b[1-2]:1", program("engine_ring.py"),
                     env={**fake_slurm["env"], "FAKE_NODES": "n[1-2]"})
    assert result.returncode == 0, result.stderr
    got = sorted(json.loads(line)["got"] for line in result.stdout.splitlines())
    assert got == ["hello from 0", "hello from 1", "hello from 2"]
    log = fake_slurm["log"].read_text().splitlines()
    assert log[1:] == ["srun --nodelist=n2"]               # b2's host agent on node n2
    script = next(fake_slurm["work"].glob("coc-*-b.sh")).read_text()
    assert "#SBATCH --nodes=3\n" in script                  # b1, b2 and the gateway b-gw


def test_stopping_coc_run_while_queued_cancels_the_batch_job(start_coc_run, fake_slurm,
                                                             monkeypatch):
    for key, value in {**fake_slurm["env"], "FAKE_QUEUED": "1"}.items():
        monkeypatch.setenv(key, value)
    proc = start_coc_run("--batch", "--profile", fake_slurm["profile"], "-n", 2, "true")
    # stop it once the relay knows the job's id (it says so): sbatch having run is not
    # enough, a loaded machine may not have read its answer yet
    said = []

    def hear():
        for line in proc.stderr:
            said.append(line)

    reader = threading.Thread(target=hear, daemon=True)
    reader.start()
    deadline = time.monotonic() + scaled(60)
    while not any("submitted batch job 4242" in line for line in said):
        assert time.monotonic() < deadline and proc.poll() is None, \
            f"no job submitted; coc-run exit code: {proc.poll()}, said: {''.join(said)}"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=scaled(15))
    reader.join(scaled(15))
    err = "".join(said)
    assert proc.returncode != 0
    assert fake_slurm["log"].read_text().splitlines()[-1] == "scancel 4242"
    assert "batch job 4242 cancelled before it started" in err


def test_a_wrong_token_learns_nothing(tmp_path):
    """A process that connects to the relay without the token is dropped, unanswered."""
    relay = subprocess.Popen([sys.executable, "-m", "coc.launcher.batch"], cwd=tmp_path,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        fake = tmp_path / "fake-submit"
        fake.write_text("#!/bin/sh\necho 7\n")
        fake.chmod(0o755)
        relay.stdin.write(protocol.encode({
            "type": "batch", "site": "b", "template": "${callback}", "values": {},
            "name": "coc-x-b", "submit": [str(fake)], "cancel": ["true"], "job_id": r"(\d+)",
            "stdin": False, "callback": "127.0.0.1"}))
        relay.stdin.flush()
        script = tmp_path / "coc-x-b.sh"
        deadline = time.monotonic() + scaled(60)
        while not script.exists() or not script.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        host, port = script.read_text().split(":")
        with socket.create_connection((host, int(port)), timeout=scaled(5)) as sock:
            sock.sendall(protocol.encode({"type": "batch-agent", "token": "guess"}))
            sock.settimeout(5)
            assert sock.recv(100) == b""                 # closed without a word
        relay.stdin.close()                               # coc-run gone: cancel, exit
        assert relay.wait(timeout=scaled(10)) == 1
    finally:
        if relay.poll() is None:
            relay.kill()
        relay.wait(timeout=scaled(5))
        relay.stdout.close()
        print(relay.stderr.read().decode())
        relay.stderr.close()
