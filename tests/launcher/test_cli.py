"""coc-run's command line: program detection, and clear errors (exit 2, no traceback)."""

import os

import pytest

from coc.launcher import cli
from coc.launcher.cli import rank_command, split_command
from coc.pycommand import python_argv


def test_split_command_stops_at_the_program_and_honours_double_dash():
    assert split_command(["-np", "4", "--", "-weird-name", "-n"]) == (["-np", "4"],
                                                                      ["-weird-name", "-n"])
    assert split_command(["-x", "A=1", "--timeout", "5", "a.out", "--timeout"]) == \
        (["-x", "A=1", "--timeout", "5"], ["a.out", "--timeout"])
    assert split_command(["--dry-run"]) == (["--dry-run"], [])


def test_python_programs_run_under_the_abort_hook_and_others_as_given():
    assert rank_command(["/usr/bin/python3.11", "app.py", "1"], python="py") == \
        python_argv("coc", "app.py", "1", python="/usr/bin/python3.11")
    # a bare python means the site's Python, not whatever PATH finds first there
    assert rank_command(["python3", "-m", "pkg"], python="py") == \
        python_argv("coc", "-m", "pkg", python="py")
    assert rank_command(["python", "-c", "print(1)"]) == ["python", "-c", "print(1)"]
    assert rank_command(["./a.out", "x.py"]) == ["./a.out", "x.py"]


def _error(capsys, *argv):
    status = cli.main([*map(str, argv)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert err.startswith("coc-run: error: ")
    return err


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
@pytest.mark.parametrize("argv, words", [
    (["--host", "zz9", "true"], ["host zz9: unknown host", "a[1-4]"]),
    (["--host", "a-gw", "true"], ["host a-gw: is a dedicated gateway"]),
    (["--site", "c=1", "true"], ["site c: no hosts to run ranks on", "a, b"]),
    (["--site", "a=x", "true"], ["--site a=x: the count must be a number"]),
    (["-n", "17", "true"], ["site a: 9 ranks but only 8 slots", "--oversubscribe"]),
    (["-n", "2", "--site", "a=1", "true"], ["-n 2 disagrees with --site counts"]),
    (["-x", "COC_TEST_SURELY_UNSET", "true"], ["COC_TEST_SURELY_UNSET is not set"]),
    (["--spawner", "b=ssh", "true"], ["site b: the ssh spawner needs the site's login host"]),
    (["--spawner", "b=telnet", "true"], ["site b: unknown spawner 'telnet'"]),
    (["--spawner", "q=local", "true"], ["site q: --spawner: unknown site"]),
    (["--topology", "no-such-machine", "true"], ["no-such-machine", "two-sites"]),
    (["--timeout", "0", "true"], ["--timeout 0: must be a positive number of seconds"]),
    (["--timeout", "nan", "true"], ["--timeout nan: must be a positive number of seconds"]),
    (["--timeout", "inf", "true"], ["--timeout inf: must be a positive number of seconds"]),
    (["-n", "0", "true"], ["-n 0: need at least one rank"]),
    (["--site", "a=0", "true"], ["--site a=0: need at least one rank"]),
    (["--site", "a=2", "--site", "b=0", "true"], ["--site b=0: need at least one rank"]),
    (["-n", "2"], ["no program given"]),
    (["--hostfile", "/nonexistent/hosts", "true"], ["--hostfile /nonexistent/hosts"]),
    (["--output-dir", "/proc/no/such", "true"], ["--output-dir /proc/no/such"]),
])
def test_bad_requests_get_a_clear_message_and_exit_2(capsys, argv, words):
    err = _error(capsys, *argv)
    for word in words:
        assert word in err


def test_a_bad_topology_file_is_named_with_its_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("networks:\n  lan: {technology: ethernet, latency: 1us, bandwidth: 1Gbit/s}\n"
                   "sites:\n  a:\n    hosts:\n      - {name: h1, interfaces: [lan-x]}\n")
    err = _error(capsys, "--topology", bad, "true")
    assert f"{bad}:6" in err and "lan-x" in err


def test_hostfile_limits_the_hosts_and_their_slots(capsys, tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two hosts\nb2 slots=1\na[3-4]:1\n")
    assert cli.main(["--hostfile", str(hostfile), "--dry-run", "true"]) == 0
    out = capsys.readouterr().out
    assert "3 ranks" in out and f"hosts from: --hostfile {hostfile}" in out
    assert "a3           rank 0" in out and "a4           rank 1" in out
    assert "b2           rank 2" in out


def test_a_scheduler_allocation_naming_topology_hosts_limits_placement(capsys, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4711")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "b[3-4]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "1(x2)")
    assert cli.main(["--dry-run", "true"]) == 0
    out = capsys.readouterr().out
    assert "hosts from: slurm job 4711: b[3-4]" in out and "2 ranks" in out


def test_an_allocation_of_other_hosts_is_ignored_and_said_so(capsys, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4712")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-02]")
    assert cli.main(["--dry-run", "true"]) == 0
    assert "hosts from: topology (slurm job 4712 names no host of it)" in capsys.readouterr().out


def test_docs_list_every_option_and_every_rank_variable():
    from pathlib import Path

    from coc.launcher.environment import RANK_VARIABLES

    docs = (Path(__file__).parents[2] / "docs" / "launcher.md").read_text()
    for flags, _ in cli._OPTIONS:
        assert f"`{flags[0]}" in docs, flags
    for variable, meaning in RANK_VARIABLES.items():
        assert f"| `{variable}` | {meaning} |" in docs, variable


def test_testbed_name_implies_its_topology(capsys):
    # no testbed of that name is up: the name is taken as the topology's
    assert cli.main(["--testbed", "private-pair", "--dry-run", "true"]) == 0
    out = capsys.readouterr().out
    assert "topology: private-pair (" in out, out


@pytest.mark.root
def test_testbed_built_under_another_name_implies_the_topology_it_was_built_from(capsys):
    import coc.testbed
    from coc.topology import load

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with coc.testbed.up(load("private-pair"), name=f"clitb-{os.getpid()}") as bed:
        assert cli.main(["--testbed", bed.name, "--dry-run", "true"]) == 0
    out = capsys.readouterr().out
    assert "topology: private-pair (" in out, out
