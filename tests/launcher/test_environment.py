"""Rank environment and scheduler allocations, checked against recorded batch environments."""

import json
from pathlib import Path

import pytest

from coc.errors import LaunchError, TopologyError
from coc.launcher.environment import (RANK_VARIABLES, parse_exports, rank_environment,
                                      scheduler_allocation)
from coc.launcher.placement import Placement

RECORDED = Path(__file__).parents[1] / "data" / "launcher" / "env"


def _environ(case, tmp_path):
    """Return a recorded environment with its host files written under ``tmp_path``."""
    environ = dict(case["environ"])
    for variable, text in case.get("files", {}).items():
        path = tmp_path / variable.lower()
        path.write_text(text)
        environ[variable] = str(path)
    return environ


@pytest.mark.parametrize("name", sorted(p.stem for p in RECORDED.glob("*.json")))
def test_recorded_batch_environments_map_onto_hosts_and_slots(name, tmp_path):
    case = json.loads((RECORDED / f"{name}.json").read_text())
    allocation = scheduler_allocation(_environ(case, tmp_path))
    if case["expected"] is None:
        assert allocation is None
        return
    assert allocation.scheduler == case["expected"]["scheduler"]
    assert allocation.job_id == case["expected"]["job_id"]
    assert [list(h) for h in allocation.hosts] == case["expected"]["hosts"]


@pytest.mark.parametrize("environ, words", [
    ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"},
     "gives 2 counts for 3 hosts"),
    ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "two"}, "expected counts like"),
    ({"LSB_MCPU_HOSTS": "hostA 4 hostB"}, "expected 'host slots host slots ...'"),
    ({"PBS_NODEFILE": "/nonexistent/nodes"}, "PBS_NODEFILE=/nonexistent/nodes: cannot read"),
])
def test_broken_batch_environments_are_named(environ, words):
    with pytest.raises(LaunchError, match=words):
        scheduler_allocation(environ)


def test_a_malformed_slurm_hostlist_is_a_hostlist_error():
    with pytest.raises(TopologyError, match="n\\[1-"):
        scheduler_allocation({"SLURM_JOB_NODELIST": "n[1-"})


def test_sge_host_file_lines_are_checked(tmp_path):
    (tmp_path / "pe").write_text("sge-n1 four all.q@sge-n1 UNDEFINED\n")
    with pytest.raises(LaunchError, match=r"pe:1: expected 'host slots queue processors'"):
        scheduler_allocation({"PE_HOSTFILE": str(tmp_path / "pe")})


def test_rank_environment_fills_every_documented_variable_but_the_control_fd():
    env = rank_environment(Placement(5, "b", "b3", 1, 2), 8, "job7", "/t/two-sites.yaml")
    assert set(env) == set(RANK_VARIABLES) - {"COC_CONTROL_FD"}
    assert env == {"COC_RANK": "5", "COC_SIZE": "8", "COC_SITE": "b", "COC_HOST": "b3",
                   "COC_LOCAL_RANK": "1", "COC_LOCAL_SIZE": "2", "COC_JOB_ID": "job7",
                   "COC_TOPOLOGY": "/t/two-sites.yaml", "PMI_RANK": "5", "PMI_SIZE": "8"}


def test_exports_take_values_given_or_inherited_and_reject_bad_names():
    assert parse_exports(["A=x=y", "B="], {}) == {"A": "x=y", "B": ""}
    with pytest.raises(LaunchError, match="'1A' is not a variable name"):
        parse_exports(["1A=2"], {})
