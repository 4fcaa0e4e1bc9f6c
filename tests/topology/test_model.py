"""The model: YAML and dicts become a networkx graph with the attributes the spec names."""

import warnings

import networkx as nx
import pytest

from coc.errors import TopologyError, TopologyWarning
from coc.topology import (Topology, from_dict, hosts, library_names, library_path, load, loads,
                          networks, placement_slots, sites, to_dict)


@pytest.fixture
def small(good):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(good("two-sites-small"))


def test_hosts_networks_interfaces(small, good):
    assert isinstance(small, nx.Graph) and isinstance(small, Topology)
    assert small.graph["name"] == "two-sites-small"
    assert small.graph["file"] == str(good("two-sites-small"))
    assert small.graph["forward_cost"] == 10e-6
    assert sites(small) == ["a", "b"]
    assert hosts(small, site="b") == ["b1", "b2", "b-gw"]
    assert networks(small) == ["a-lan", "b-lan", "wan"]
    a1 = small.nodes["a1"]
    assert a1 == {"kind": "host", "site": "a", "slots": 2, "role": "compute", "dedicated": False,
                  "hostname": "a1", "forward_cost": 10e-6, "line": 11,
                  "outbound_only": False}
    wan = small.nodes["wan"]
    assert (wan["latency"], wan["bandwidth"], wan["scope"], wan["site"]) == (
        1e-3, 125e6, "public", None)
    assert small.nodes["a-lan"]["site"] == "a"
    assert small.edges["a-gw", "wan"] == {"kind": "interface", "name": "wan0",
                                          "address": "198.51.100.1"}


def test_addresses_explicit_first_then_next_free(small):
    assert small.edges["a-gw", "a-lan"]["address"] == "10.1.0.254"
    assert [small.edges[h, "a-lan"]["address"] for h in ("a1", "a2")] == ["10.1.0.1",
                                                                          "10.1.0.2"]
    assert small.edges["b-gw", "wan"]["address"] == "198.51.100.2"


def test_a_range_with_an_address_counts_up_from_it():
    G = loads("""
networks: {lan: {latency: 1us, bandwidth: 1Gbit/s, subnet: 10.0.0.0/24}}
sites:
  s:
    hosts:
      - {name: "n[1-3]", interfaces: [{network: lan, address: 10.0.0.10}]}
      - {name: m, interfaces: [lan]}
""")
    assert [G.edges[h, "lan"]["address"] for h in ("n1", "n2", "n3", "m")] == [
        "10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.1"]


def test_role_alias_and_placement(small):
    G = loads("""
networks: {lan: {latency: 1us, bandwidth: 1Gbit/s}}
sites:
  s:
    hosts:
      - {name: fe, role: login, slots: 0, interfaces: [lan]}
      - {name: "n[1-2]", slots: 4, interfaces: [lan]}
""")
    assert G.nodes["fe"]["role"] == "frontend"
    assert placement_slots(G) == {"n1": 4, "n2": 4}
    # a shared gateway runs ranks, a dedicated one does not
    assert placement_slots(small) == {"a1": 2, "a2": 2, "a-gw": 1, "b1": 2, "b2": 2}


def test_to_dict_round_trips(small):
    again = from_dict(to_dict(small), check=False)
    assert set(again.nodes) == set(small.nodes)

    def strip(G):
        return ({n: {k: v for k, v in d.items() if k != "line"} for n, d in G.nodes(data=True)},
                {frozenset(e[:2]): {k: v for k, v in e[2].items() if k != "line"}
                 for e in G.edges(data=True)})

    assert strip(again) == strip(small)


def test_library_lookup():
    assert "two-sites" in library_names()
    assert library_path("two-sites").name == "two-sites.yaml"
    with pytest.raises(TopologyError, match="no topology file or library topology named "
                                            "'nope'; the library has: .*two-sites"):
        load("nope")


def test_unreadable_file_names_it(tmp_path):
    with pytest.raises(TopologyError, match="missing.yaml: cannot read the topology"):
        load(tmp_path / "missing.yaml")


def test_document_must_be_a_mapping():
    with pytest.raises(TopologyError, match="t.yaml:1: expected a mapping"):
        loads("- a\n- b\n", file="t.yaml")


def test_str_and_graph_copy_keep_the_class(small):
    assert str(small) == "Topology 'two-sites-small': 2 sites, 6 hosts, 3 networks"
    assert isinstance(small.copy(), Topology)


def test_repr_svg_never_raises_without_drawing(small):
    svg = small._repr_svg_()
    assert svg is None or svg.lstrip().startswith(("<?xml", "<svg"))


HEAD = ("networks: {lan: {latency: 1us, bandwidth: 1Gbit/s}, "
        "san: {latency: 1us, bandwidth: 1Gbit/s}}\n")


@pytest.mark.parametrize("host, message", [
    ("{name: h, interfaces: [lan, lan]}", "t.yaml:2: host 'h': two interfaces on network 'lan'"),
    ("{name: h, interfaces: [{network: lan, name: ib0}, {network: san, name: ib0}]}",
     "t.yaml:2: host 'h': interface name 'ib0' used twice"),
    ("{name: h, interfaces: [{network: lan, adress: 10.0.0.1}]}",
     "t.yaml:2: host 'h': interface 0: unknown key 'adress' (did you mean 'address'?)"),
    ("{name: h, interfaces: [{network: lan, address: 10.0.0.999}]}",
     "t.yaml:2: host 'h': '10.0.0.999' is not an IP address"),
    ("{name: 'h[1-3]', hostname: 'h[1-2].example.org', interfaces: [lan]}",
     "t.yaml:2: host 'h[1-3]': 3 hosts but 2 hostnames"),
    ("{name: h, forward_cost: fast, interfaces: [lan]}",
     "t.yaml:2: host 'h': forward_cost 'fast' is not a time"),
])
def test_host_entry_errors(host, message):
    with pytest.raises(TopologyError) as info:
        loads(HEAD + f"sites: {{a: {{hosts: [{host}]}}}}\n", file="t.yaml")
    assert str(info.value).startswith(message)


def test_hostname_ranges_pair_with_names():
    with pytest.warns(TopologyWarning, match="network 'san' is used by no host"):
        G = loads(HEAD + "sites: {a: {hosts: [{name: 'h[1-2]', hostname: 'n[7-8].example.org', "
                         "interfaces: [lan]}]}}\n")
    assert [G.nodes[h]["hostname"] for h in ("h1", "h2")] == ["n7.example.org",
                                                             "n8.example.org"]


def test_show_route_draws_the_route(small):
    pytest.importorskip("matplotlib")
    view = small.show_route("a1", "b2", size="4MiB")
    assert str(view).splitlines()[-1].startswith("total ")
    svg = view._repr_svg_()
    assert svg.lstrip().startswith(("<?xml", "<svg")) and svg != small._repr_svg_()


def test_yaml_anchors_and_merge_keys_may_override():
    G = loads("""
networks:
  a-lan: &lan {technology: ethernet, latency: 20us, bandwidth: 10Gbit/s}
  b-lan: {<<: *lan, latency: 5us}
sites:
  a: {hosts: [{name: g, role: gateway, interfaces: [a-lan, b-lan]}]}
""")
    assert (G.nodes["b-lan"]["latency"], G.nodes["b-lan"]["bandwidth"]) == (5e-6, 1.25e9)


def test_wan_encrypt_and_compress_round_trip():
    text = """
networks:
  lan: {latency: 20us, bandwidth: 10Gbit/s}
  wan: {latency: 1ms, bandwidth: 1Gbit/s, encrypt: true, compress: zstd}
sites:
  a: {hosts: [{name: a1, interfaces: [lan]}, {name: gw, role: gateway, interfaces: [lan, wan]}]}
  b: {hosts: [{name: b1, interfaces: [wan]}]}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = loads(text)
        again = from_dict(to_dict(G))
    assert (G.nodes["wan"]["encrypt"], G.nodes["wan"]["compress"]) == (True, "zstd")
    assert (G.nodes["lan"]["encrypt"], G.nodes["lan"]["compress"]) == (False, "none")
    assert to_dict(G)["networks"]["wan"]["encrypt"] is True
    assert "encrypt" not in to_dict(G)["networks"]["lan"]
    assert again.nodes["wan"]["compress"] == "zstd"
