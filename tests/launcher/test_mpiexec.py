"""The ``mpiexec`` spawner with real MPICH: the site's own mpiexec starts the site's ranks.

Site a runs under MPICH's ``mpiexec`` (``pip install mpich mpi4py``), site b as local
processes; messages inside site a go through MPI, those between the sites through the
gateway daemons.
"""

import json
import os
import signal
from importlib.util import find_spec
from pathlib import Path

import pytest

from coc.launcher.spawners.mpiexec import find_mpiexec
from launcher_helpers import alive, assert_all_gone, program, recorded_pids, wait_for_files
from hang_bounds import scaled

pytestmark = pytest.mark.skipif(
    find_spec("mpi4py") is None or find_mpiexec() is None,
    reason="needs MPICH's mpiexec and mpi4py (pip install mpich mpi4py)")

SITES = ["--site", "a=3", "--site", "b=2", "--spawner", "a=mpiexec"]
HOSTS = {0: "a/a1", 1: "a/a1", 2: "a/a2", 3: "b/b1", 4: "b/b1"}    # where SITES puts ranks


def _parent(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_site_a_under_mpiexec_talks_mpi_inside_and_crosses_to_site_b(coc_run):
    result = coc_run(*SITES, "--tag-output", program("site_mpi.py"))
    assert result.returncode == 0, result.stderr
    reports = {}
    for line in result.stdout.splitlines():
        tag, _, text = line.partition(" ")
        report = json.loads(text)
        reports[report["rank"]] = report
        assert tag == f"[{HOSTS[report['rank']]}/{report['rank']}]"
    assert sorted(reports) == list(range(5))
    for rank, report in reports.items():
        assert report["got"] == {"from": (rank - 1) % 5}
        stats = report["stats"]
        if rank < 3:           # site a: the MPI job of its mpiexec, ranks in coc's order
            assert report["mpi"] == [rank, 3]
        else:
            assert report["mpi"] == [None, None]
        # a send inside site a goes through MPI, a send to the other site through gateways
        assert stats["site_mpi_messages"] == (1 if rank < 2 else 0)
        assert stats["inter_site_messages"] == (1 if rank in (2, 4) else 0)


def test_output_of_ranks_under_mpiexec_stays_whole_and_tagged(coc_run):
    result = coc_run(*SITES, "--tag-output", program("partial.py"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for rank, where in HOSTS.items():
        mine = [line for line in lines if line.startswith(f"[{where}/{rank}] ")]
        assert mine == [f"[{where}/{rank}] r{rank}-line{i}-pieces" for i in range(5)] \
            + [f"[{where}/{rank}] r{rank}-tail-without-newline"]
    assert len(lines) == 5 * 6


def test_stdin_reaches_rank_0_under_mpiexec(coc_run):
    result = coc_run(*SITES, "sh", "-c", 'test "$COC_RANK" = 0 && cat || true',
                     input="to rank zero\n", stdin=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "to rank zero\n"


@pytest.mark.parametrize("how, status", [("--exit-rank", 7), ("--kill-rank", 128 + 9)])
def test_a_failing_rank_under_mpiexec_stops_the_whole_job(start_coc_run, tmp_path, how, status):
    proc = start_coc_run(*SITES, program("rank.py"), "--pid-dir", tmp_path, "--grandchild",
                         how, 1, "--code", 7, "--after", 1.0)
    wait_for_files(tmp_path, 5)
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    shepherds = [r["agent"] for r in records if r["rank"] < 3]
    proxies = {_parent(pid) for pid in shepherds if alive(pid)}
    launchers = {_parent(pid) for pid in proxies if alive(pid)}
    _, err = proc.communicate(timeout=scaled(20))
    assert proc.returncode == status, err
    words = "exited with code 7" if status == 7 else "was killed by signal 9 (SIGKILL)"
    assert f"coc-run: rank 1 (site a, host a1) {words}" in err
    assert len(proxies) == 1 and len(launchers) == 1     # one mpiexec, one proxy
    assert_all_gone(recorded_pids(tmp_path) | proxies | launchers)


def test_a_missing_program_under_mpiexec_ends_the_job_with_127(coc_run):
    result = coc_run(*SITES, "./no-such-program")
    assert result.returncode == 127
    assert "cannot execute './no-such-program'" in result.stderr


def test_killing_coc_run_ends_the_site_mpiexec_and_its_ranks(start_coc_run, tmp_path):
    proc = start_coc_run(*SITES, program("rank.py"), "--pid-dir", tmp_path, "--grandchild")
    wait_for_files(tmp_path, 5)
    shepherds = [json.loads(p.read_text())["agent"] for p in tmp_path.glob("[012].json")]
    proxies = {_parent(pid) for pid in shepherds}
    launchers = {_parent(pid) for pid in proxies}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=scaled(5))
    assert_all_gone(recorded_pids(tmp_path) | proxies | launchers)


def test_ctrl_c_stops_ranks_under_mpiexec_that_ignore_sigterm(start_coc_run, tmp_path):
    proc = start_coc_run(*SITES, program("rank.py"), "--pid-dir", tmp_path, "--ignore-term")
    wait_for_files(tmp_path, 5)
    shepherds = [json.loads(p.read_text())["agent"] for p in tmp_path.glob("[012].json")]
    launchers = {_parent(_parent(pid)) for pid in shepherds}
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=scaled(10))
    assert proc.returncode == 130
    assert "coc-run: SIGINT received, job stopped" in err
    assert_all_gone(recorded_pids(tmp_path) | set(shepherds) | launchers)


@pytest.mark.parametrize("mpiexec, status, words", [
    ("false", 1, "mpiexec ended (exit code 1) before it started this rank"),
    ("/nonexistent/mpiexec", 127, "cannot execute '/nonexistent/mpiexec': No such file"),
])
def test_a_site_mpiexec_that_fails_fails_its_ranks_only(coc_run, mpiexec, status, words):
    result = coc_run(*SITES, "sh", "-c", 'echo "rank $COC_RANK ran"; sleep 2',
                     env={"COC_MPIEXEC": mpiexec})
    assert result.returncode == status
    for rank in range(3):
        assert f"coc-run: site a rank {rank}: {words}" in result.stderr
    assert f"coc-run: rank 0 (site a, host a1) exited with code {status}" in result.stderr
    assert "site b" not in result.stderr        # site b started its ranks itself


def test_two_sites_each_under_its_own_mpiexec_are_two_mpi_jobs(coc_run):
    result = coc_run("--site", "a=2", "--site", "b=2", "--spawner", "a=mpiexec",
                     "--spawner", "b=mpiexec", program("site_mpi.py"))
    assert result.returncode == 0, result.stderr
    reports = sorted((json.loads(line) for line in result.stdout.splitlines()),
                     key=lambda r: r["rank"])
    assert [r["mpi"] for r in reports] == [[0, 2], [1, 2], [0, 2], [1, 2]]
    assert [r["got"] for r in reports] == [{"from": (r - 1) % 4} for r in range(4)]
    assert [r["stats"]["site_mpi_messages"] for r in reports] == [1, 0, 1, 0]
    assert [r["stats"]["inter_site_messages"] for r in reports] == [0, 1, 0, 1]
