"""The plan hands every endpoint the model's routes: size classes, hop networks, delays."""

import warnings
from pathlib import Path

import pytest

from coc import topology
from coc.errors import LaunchError
from coc.launcher.latency import parse_delays
from coc.launcher.plan import make_plan

GOOD = Path(__file__).parents[1] / "data" / "topology-good"


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return topology.load(GOOD / f"{name}.yaml" if (GOOD / f"{name}.yaml").exists()
                             else name)


def _plan(name, **kwargs):
    return make_plan(_load(name), ["true"], site_counts=[("athlon", 1), ("xeon", 1)]
                     if "chemnitz" in name else [("a", 1), ("b", 1)], job_id="t", **kwargs)


def test_equal_size_classes_give_the_list_form():
    plan = _plan("two-sites")
    a_gw = plan.gateways[0].endpoint
    assert plan.route_table(0) == {1: [[a_gw, 1000]]}


def test_slow_gateway_small_direct_large_through_the_gateway():
    """The model sends small messages direct over Fast Ethernet, large ones through xeon8."""
    plan = _plan("chemnitz-slow-gateway")
    (xeon8,) = plan.gateways
    assert plan.placements[1].host == "xeon1"
    assert plan.route_table(0) == {1: {"small": [[1, 1000]], "large": [[xeon8.endpoint, 1000]]}}
    assert plan.route_table(xeon8.endpoint)[0] == [[0, 1000]]
    # each next hop is dialed on the network the model's step to it uses
    assert plan.hop_networks(0) == {1: "admin", xeon8.endpoint: "myrinet"}
    assert plan.hop_networks(xeon8.endpoint) == {0: "myrinet", 1: "xeon-sci"}


def test_a_next_hop_of_both_classes_is_dialed_on_the_large_class_network():
    plan = _plan("chemnitz-2003")
    (xeon8,) = plan.gateways
    assert plan.route_table(0) == {1: [[xeon8.endpoint, 1000]]}
    assert plan.hop_networks(0) == {xeon8.endpoint: "myrinet"}


def test_wildcard_listeners_are_dialed_on_the_route_network():
    plan = _plan("two-sites")
    a_gw, b_gw = (g.endpoint for g in plan.gateways)
    peers = {0: "tcp://10.1.0.1:4000", 1: "tcp://10.2.0.1:4000",
             a_gw: "tcp://0.0.0.0:5000 unix:@coc/x", b_gw: "tcp://0.0.0.0:6000"}
    assert plan.peers_for(a_gw, peers)[b_gw] == "tcp://198.51.100.2:6000"
    assert plan.peers_for(b_gw, peers)[a_gw] == "tcp://198.51.100.1:5000 unix:@coc/x"
    assert plan.peers_for(0, peers)[a_gw] == "tcp://10.1.0.5:5000 unix:@coc/x"
    assert plan.peers_for(0, peers)[b_gw] == "tcp://0.0.0.0:6000"   # never dialed by rank 0


def test_a_hop_network_without_an_address_is_a_clear_error():
    plan = _plan("chemnitz-2003")
    (xeon8,) = plan.gateways
    with pytest.raises(LaunchError, match="host 'xeon8' has no address on network 'myrinet'"):
        plan.peers_for(0, {xeon8.endpoint: "tcp://0.0.0.0:5000"})


def test_delays_only_where_emulated():
    assert _plan("two-sites").delays(0) == {}
    bed = _plan("two-sites", testbed=True)          # the WAN's 1 ms is emulated, LANs not
    a_gw, b_gw = (g.endpoint for g in bed.gateways)
    assert bed.delays(a_gw) == {b_gw: pytest.approx(1e-3)} and bed.delays(0) == {}
    swept = _plan("two-sites", delays={"wan": 0.05, "a-lan": 0.002})
    assert swept.delays(a_gw) == {b_gw: pytest.approx(0.05), 0: pytest.approx(0.002)}
    assert swept.delays(0) == {a_gw: pytest.approx(0.002)}
    assert _plan("two-sites", delays={"wan": 0.0}, testbed=True).delays(a_gw) == {}
    assert swept.rendezvous_answer(0, {})["delays"] == {a_gw: pytest.approx(0.002)}


def test_delay_overrides_reach_the_model_and_bad_ones_are_named():
    plan = _plan("two-sites", delays=parse_delays(["wan=10ms"]))
    assert topology.route(plan.topology, "a1", "b1").time == pytest.approx(10.06e-3)
    with pytest.raises(LaunchError, match="unknown network wam"):
        _plan("two-sites", delays={"wam": 0.01})
    with pytest.raises(LaunchError, match="expected NETWORK=TIME"):
        parse_delays(["wan"])


def test_a_rank_is_issued_the_keys_of_its_direct_peers_and_never_the_secret():
    from coc._native import engine
    secret = bytes(range(32))
    plan = make_plan(_load("two-sites"), ["true"], site_counts=[("a", 2), ("b", 2)],
                     job_id="t")
    a_gw, b_gw = (g.endpoint for g in plan.gateways)
    # ranks 0, 1 on site a reach each other directly and site b through a-gw; gateways
    # have each other and their site's ranks (they hold the secret: no welcome)
    assert plan.direct_peers == {0: {1, a_gw}, 1: {0, a_gw}, 2: {3, b_gw}, 3: {2, b_gw},
                                 a_gw: {0, 1, b_gw}, b_gw: {2, 3, a_gw}}
    welcome = plan.welcome(0, secret)
    assert "secret" not in welcome and secret.hex() not in str(welcome)
    assert welcome["keys"] == {
        "1": {"key": engine.pair_key(secret, 0, 1).hex(), "gateway": False},
        str(a_gw): {"key": engine.pair_key(secret, 0, a_gw, b_gateway=True).hex(),
                    "gateway": True}}
    assert plan.welcome(1, secret)["keys"]["0"] == welcome["keys"]["1"]
