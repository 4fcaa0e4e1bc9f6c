"""Routes, route tables and gateway sets, checked against brute force on random topologies."""

import json
import math
import warnings

import networkx as nx
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from coc.errors import TopologyError
from coc.topology import from_dict, load, route
from coc.topology.routing import FRAGMENT, PACKET, route_cost
from coc.topology.tables import gateway_sets, gateways, route_tables


@pytest.fixture
def topo(good):
    def read(stem):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load(good(stem))
    return read


# -- brute force: every simple path, interior hosts must be gateways ----------------------

def path_cost(G, path, size):
    """The cost model written out on a node path of G (hosts, networks).

    Cut-through: the first fragment crosses every network entered from a host, the first
    packet every link and the network behind it, gateways add their forwarding cost, and the
    rest of the message follows at the path's bottleneck bandwidth.
    """
    total, bottleneck = 0.0, math.inf
    for i, node in enumerate(path):
        d = G.nodes[node]
        if d["kind"] == "network":
            entered = G.edges[path[i - 1], node]["kind"]
            head = min(size, FRAGMENT if entered == "interface" else PACKET)
            total += d["latency"] + head / d["bandwidth"]
            bottleneck = min(bottleneck, d["bandwidth"])
        elif 0 < i < len(path) - 1:
            total += d["forward_cost"]
    for u, v in zip(path, path[1:]):
        e = G.edges[u, v]
        if e["kind"] == "link":
            total += e["latency"] + min(size, PACKET) / e["bandwidth"]
            bottleneck = min(bottleneck, e["bandwidth"])
    return total + max(0, size - FRAGMENT) / bottleneck


def brute_force(G, src, dst, size):
    best = math.inf
    for path in nx.all_simple_paths(G, src, dst):
        interior = [n for n in path[1:-1] if G.nodes[n]["kind"] == "host"]
        if all(G.nodes[h]["role"] == "gateway" for h in interior):
            best = min(best, path_cost(G, path, size))
    return best


def table_paths(tables, src, dst, size, depth=0):
    """Every host path the route tables can send a message along, from src to dst."""
    assert depth < len(tables.host_class), "route tables loop"
    for hop, weight in tables.next_hops(src, dst, size):
        assert weight > 0
        if hop == dst:
            yield [src, dst]
        else:
            for rest in table_paths(tables, hop, dst, size, depth + 1):
                yield [src] + rest


@st.composite
def topologies(draw):
    n_nets = draw(st.integers(1, 4))
    time = st.floats(1e-6, 1e-3).map(lambda x: f"{x!r}s")
    rate = st.floats(1e6, 1e10).map(lambda x: f"{x!r}B/s")
    nets = {f"n{i}": {"latency": draw(time), "bandwidth": draw(rate)} for i in range(n_nets)}
    pairs = [(f"n{i}", f"n{j}") for i in range(n_nets) for j in range(i + 1, n_nets)]
    links = [{"between": list(p), "latency": draw(time), "bandwidth": draw(rate)}
             for p in draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2))
             ] if pairs else []
    sites = {"s": {"hosts": []}, "t": {"hosts": []}}
    for i in range(draw(st.integers(2, 7))):
        gateway = draw(st.booleans())
        sites[draw(st.sampled_from(["s", "t"]))]["hosts"].append({
            "name": f"h{i}", "role": "gateway" if gateway else "compute",
            "forward_cost": draw(st.floats(0, 1e-4).map(lambda x: f"{x!r}s")),
            "interfaces": draw(st.lists(st.sampled_from(sorted(nets)), min_size=1,
                                        max_size=3, unique=True))})
    sites = {name: site for name, site in sites.items() if site["hosts"]}
    return from_dict({"networks": nets, "sites": sites, "links": links}, check=False)


sizes = st.sampled_from([0, 1000, 1 << 20])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(), sizes)
def test_route_is_the_cheapest_path(G, size):
    host_list = [n for n, d in G.nodes(data=True) if d["kind"] == "host"]
    for src in host_list:
        for dst in host_list:
            if src == dst:
                continue
            best = brute_force(G, src, dst, size)
            if best == math.inf:
                with pytest.raises(TopologyError, match="cannot reach"):
                    route(G, src, dst, size)
                continue
            r = route(G, src, dst, size)
            assert math.isclose(r.time, best, rel_tol=1e-12)
            assert r.time <= sum(hop.time for hop in r.hops) * (1 + 1e-12)
            assert math.isclose(route_cost(G, r.hosts, size), r.time, rel_tol=1e-12)
            assert all(G.nodes[g]["role"] == "gateway" for g in r.gateways)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(), sizes)
def test_route_tables_expand_to_cheapest_paths(G, size):
    host_list = [n for n, d in G.nodes(data=True) if d["kind"] == "host"]
    best = {(s, d): brute_force(G, s, d, size) for s in host_list for d in host_list if s != d}
    assume(all(cost < math.inf for cost in best.values()))
    tables = route_tables(G, size_classes=(size,))
    for (src, dst), cost in best.items():
        hops = tables.next_hops(src, dst, size)
        assert math.isclose(sum(w for _, w in hops), 1.0)
        assert route(G, src, dst, size).hosts[1] in {hop for hop, _ in hops}
        for path in table_paths(tables, src, dst, size):
            assert math.isclose(route_cost(G, path, size), cost, rel_tol=1e-12), path


# -- known topologies ---------------------------------------------------------------------

def test_two_sites_route_hops_and_times(topo):
    r = route(topo("two-sites-small"), "a1", "b2", size="1MiB")
    assert r.hosts == ("a1", "a-gw", "b-gw", "b2") and r.gateways == ("a-gw", "b-gw")
    assert [(h.host, h.network, h.next_host) for h in r.hops] == [
        ("a1", "a-lan", "a-gw"), ("a-gw", "wan", "b-gw"), ("b-gw", "b-lan", "b2")]
    lan, wan, ib = 20e-6 + 2**20 / 1.25e9, 1e-3 + 2**20 / 1.25e8, 2e-6 + 2**20 / 7e9
    assert [h.time for h in r.hops] == pytest.approx([lan, wan + 10e-6, ib + 10e-6])
    # pipelined: the first fragment over each hop, then the rest at the WAN's rate
    head = (20e-6 + FRAGMENT / 1.25e9) + (1e-3 + FRAGMENT / 1.25e8) + (2e-6 + FRAGMENT / 7e9)
    assert r.time == pytest.approx(head + 20e-6 + (2**20 - FRAGMENT) / 1.25e8)


def test_route_to_self_and_unknown_hosts(topo):
    G = topo("two-sites-small")
    assert route(G, "a1", "a1").hops == () and route(G, "a1", "a1").time == 0
    with pytest.raises(TopologyError, match="unknown host 'zz'"):
        route(G, "a1", "zz")
    with pytest.raises(TopologyError, match="unknown host 'wan'"):
        route(G, "wan", "a1")


def test_linked_networks_are_one_direct_hop():
    G = load("perseus")
    r = route(G, "p001", "p116")
    assert r.hosts == ("p001", "p116") and r.hops[0].networks == ("sw1", "backplane", "sw5")


def test_small_messages_take_latency_large_take_bandwidth():
    G = from_dict({
        "networks": {"fast": {"latency": "5us", "bandwidth": "100Mbit/s"},
                     "fat-a": {"latency": "50us", "bandwidth": "10Gbit/s"},
                     "fat-b": {"latency": "50us", "bandwidth": "10Gbit/s"}},
        "sites": {"s": {"hosts": [{"name": "x", "interfaces": ["fast", "fat-a"]},
                                  {"name": "g", "role": "gateway",
                                   "interfaces": ["fat-a", "fat-b"]},
                                  {"name": "y", "interfaces": ["fast", "fat-b"]}]}}})
    assert route(G, "x", "y", 0).hosts == ("x", "y")
    assert route(G, "x", "y", "4MiB").hosts == ("x", "g", "y")


def test_gateway_set_shares_equal_cost_gateways_by_bandwidth(topo):
    G = topo("two-gateways")
    small = gateways(G, "a", "b")
    assert [g for g, _ in small] == ["ga1", "ga2"]
    assert [w for _, w in small] == pytest.approx([2 / 3, 1 / 3])
    assert gateways(G, "a", "b", size="4MiB") == [("ga1", 1.0)]  # wan1 is faster
    assert gateways(G, "b", "a") == [("gb", 1.0)]
    tables = route_tables(G)
    assert tables.next_hops("a2", "b1", 0) == small
    assert tables.next_hops("a2", "b1", "4MiB") == [("ga1", 1.0)]


def test_gateway_sets_for_every_pair(topo):
    sets = gateway_sets(topo("two-sites-small"))
    assert sets == {("a", "b"): [("a-gw", 1.0)], ("b", "a"): [("b-gw", 1.0)]}
    with pytest.raises(TopologyError, match="unknown site 'c'"):
        gateways(topo("two-sites-small"), "a", "c")


def test_host_table_is_what_an_engine_needs(topo):
    tables = route_tables(topo("two-sites-small"))
    table = tables.host_table("a1")
    assert set(table) == {"small", "large"}
    assert table["small"]["a2"] == [("a2", 1.0)]          # next hop == destination: direct
    assert table["small"]["b1"] == [("a-gw", 1.0)]
    assert table["large"]["b-gw"] == [("a-gw", 1.0)]
    assert tables.host_table("a-gw")["small"]["b-gw"] == [("b-gw", 1.0)]
    assert json.loads(json.dumps(tables.to_dict()))["size_classes"] == {"small": 0,
                                                                       "large": 1 << 20}
    with pytest.raises(TopologyError, match="unknown host 'zz'"):
        tables.next_hops("a1", "zz")


def synthetic(n_sites, n_hosts):
    return from_dict({
        "networks": {"wan": {"latency": "1ms", "bandwidth": "1Gbit/s", "scope": "public"},
                     **{f"lan{s}": {"latency": "20us", "bandwidth": "10Gbit/s"}
                        for s in range(n_sites)}},
        "sites": {f"s{s}": {"hosts": [
            {"name": f"s{s}n[1-{n_hosts}]", "interfaces": [f"lan{s}"]},
            {"name": f"s{s}gw[1-2]", "role": "gateway", "interfaces": [f"lan{s}", "wan"]}]}
            for s in range(n_sites)}}, check=False)


def test_table_size_grows_with_sites_not_hosts():
    small, big = route_tables(synthetic(3, 4)), route_tables(synthetic(3, 40))
    assert small.n_entries == big.n_entries
    assert len(big.classes) == 6
    assert route_tables(synthetic(6, 4)).n_entries > small.n_entries
    assert big.next_hops("s0n1", "s2n7") == [("s0gw1", 0.5), ("s0gw2", 0.5)]


def test_size_classes_must_increase(topo):
    with pytest.raises(TopologyError, match="size classes must be increasing"):
        route_tables(topo("two-sites-small"), size_classes=(1 << 20, 0))


def test_a_tie_found_cheaper_by_rounding_still_settles_the_network():
    # T is reached first through g1, U and the link, then (cheaper by 5e-18 s, a tie)
    # through g2; the search must still go on from T to W, where the destination is.
    us = 1e-6
    G = from_dict({
        "networks": {name: {"latency": f"{lat!r}s", "bandwidth": "1Gbit/s"} for name, lat in
                     [("S", us), ("T", 5 * us), ("U", us), ("W", us)]},
        "sites": {"s": {"hosts": [
            {"name": "src", "interfaces": ["S"]},
            {"name": "g1", "role": "gateway", "forward_cost": "1us", "interfaces": ["S", "U"]},
            {"name": "g2", "role": "gateway", "forward_cost": f"{us * (3 - 5e-12)!r}s",
             "interfaces": ["S", "T"]},
            {"name": "g3", "role": "gateway", "forward_cost": "1us", "interfaces": ["T", "W"]},
            {"name": "dst", "interfaces": ["W"]}]}},
        "links": [{"between": ["U", "T"], "latency": "1us", "bandwidth": "1Gbit/s"}]})
    r = route(G, "src", "dst")
    assert r.hosts == ("src", "g2", "g3", "dst")
    assert math.isclose(r.time, brute_force(G, "src", "dst", 0), rel_tol=1e-12)
    assert {hop for hop, _ in route_tables(G).next_hops("src", "dst")} == {"g1", "g2"}


@pytest.mark.parametrize("stem", ["two-sites-small", "two-gateways"])
def test_route_tables_match_golden_files(topo, good, stem):
    # regenerate after a deliberate change: json.dump(route_tables(G).to_dict(), f, indent=1,
    # sort_keys=True) into tests/data/topology-good/<stem>.tables.json, and review the diff
    golden = json.loads(good(stem).with_suffix(".tables.json").read_text())
    assert json.loads(json.dumps(route_tables(topo(stem)).to_dict())) == golden


def test_message_time_adds_the_rendezvous_handshake_above_the_eager_limit(topo):
    from coc.topology.routing import EAGER_LIMIT, message_time

    G = topo("two-sites-small")
    assert message_time(G, "a1", "b2", EAGER_LIMIT) == route(G, "a1", "b2", EAGER_LIMIT).time
    big = EAGER_LIMIT + 1
    handshake = route(G, "a1", "b2").time + route(G, "b2", "a1").time   # RTS there, CTS back
    assert message_time(G, "a1", "b2", big) == pytest.approx(
        route(G, "a1", "b2", big).time + handshake)
