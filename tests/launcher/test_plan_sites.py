"""The plan's part in real-site constraints: port ranges per host, links dialed before ranks."""

import warnings
from pathlib import Path

import pytest

from coc import topology
from coc.errors import LaunchError
from coc.launcher.cli import parse_port_ranges
from coc.launcher.plan import make_plan
from coc.ports import PORT_RANGE_VARIABLE

GOOD = Path(__file__).parents[1] / "data" / "topology-good"


def _plan(name, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = topology.load(GOOD / f"{name}.yaml" if (GOOD / f"{name}.yaml").exists() else name)
    return make_plan(G, ["true"], site_counts=[("a", 1), ("b", 1)], job_id="t", **kwargs)


def test_ranks_and_gateways_get_their_hosts_port_ranges():
    plan = _plan("two-sites-ports", port_ranges=parse_port_ranges(["b=43000-43019"]))
    assert plan.rank_env(0)[PORT_RANGE_VARIABLE] == "41000-41099"
    assert plan.rank_env(1)[PORT_RANGE_VARIABLE] == "43000-43019"
    configs = {g["host"]: g["config"]["port_range"]
               for site in plan.sites for g in plan.agent_job(site, b"s" * 32, 1.0)["gateways"]}
    assert configs == {"a-gw": [41050, 41059], "b-gw": [43000, 43019]}


def test_no_range_leaves_the_kernel_to_choose():
    plan = _plan("two-sites")
    assert PORT_RANGE_VARIABLE not in plan.rank_env(0)
    assert plan.agent_job("a", b"s" * 32, 1.0)["gateways"][0]["config"]["port_range"] == [0, 0]


def test_port_range_for_an_unknown_site_is_an_error():
    with pytest.raises(LaunchError, match="site c: --port-range: unknown site"):
        _plan("two-sites", port_ranges=parse_port_ranges(["c=1-2"]))


def test_bad_port_range_option_names_it():
    with pytest.raises(LaunchError, match="--port-range 9-3: port range '9-3' is empty"):
        parse_port_ranges(["9-3"])


def test_outbound_only_gateway_dials_and_is_not_dialed():
    plan = _plan("two-sites-outbound")
    a_gw, b_gw = (g.endpoint for g in plan.gateways)
    assert plan.dials == {b_gw: [a_gw]}
    peers = {e: f"tcp://0.0.0.0:{4000 + e}" for e in range(4)}
    assert b_gw not in plan.peers_for(a_gw, peers)          # a-gw never tries to dial b-gw
    assert b_gw not in plan.peers_for(0, peers)
    assert plan.peers_for(b_gw, peers)[a_gw] == "tcp://198.51.100.1:4002"
    assert plan.peers_for(1, peers)[b_gw] == "tcp://10.2.0.5:4003"     # inside site b: yes
    assert all(plan.agent_job(site, b"s" * 32, 1.0)["hold_ranks"] for site in plan.sites)


def test_plain_sites_dial_from_the_lower_endpoint():
    plan = _plan("two-sites")
    a_gw, b_gw = (g.endpoint for g in plan.gateways)
    assert plan.dials == {a_gw: [b_gw]}


def test_one_site_needs_no_links():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = topology.load("two-sites")
    plan = make_plan(G, ["true"], site_counts=[("a", 2)], job_id="t")
    assert plan.dials == {}
    assert plan.agent_job("a", b"s" * 32, 1.0)["hold_ranks"] is False


def test_both_sites_outbound_only_fails_before_anything_starts():
    with pytest.raises(LaunchError) as info:
        _plan("two-sites-no-inbound")
    assert str(info.value) == (
        "no direction works for the link a-gw -> b-gw over network wan: site a and site b are "
        "both outbound_only (accept no inbound connections); let one of them accept "
        "connections on its gateway (and open its port range)")
