"""Validation: each bad file in tests/data/topology-bad is pinned to its message."""

import warnings
from pathlib import Path

import pytest

from coc.errors import TopologyError, TopologyWarning
from coc.topology import load, loads, validate
from coc.topology.hostlist import HostlistError

BAD = Path(__file__).resolve().parents[1] / "data" / "topology-bad"

# file -> (line or None, message after "file:line: ")
EXPECTED = {
    "yaml-syntax": (3, "YAML syntax error: did not find expected ',' or '}' "
                       "(while parsing a flow mapping)"),
    "unknown-network": (6, "host 'a1': unknown network 'lan-x'"),
    "duplicate-host": (9, "host 'n3': name already used by a host (line 6)"),
    "host-named-like-network": (6, "host 'lan': name already used by a network (line 2)"),
    "duplicate-address": (8, "host 'n2': address 10.0.0.7 on network 'lan' is already used by "
                             "host 'n1' on network 'lan'"),
    "duplicate-hostname": (7, "host 'n2': hostname 'node.example.org' already used by host "
                              "'n1'"),
    "duplicate-key": (3, "duplicate key 'lan' (first given on line 2)"),
    "no-interface": (7, "host 'n2': no interface (a host needs at least one network)"),
    "bad-latency": (4, "network 'lan': latency '10 parsecs' is not a time: expected a time "
                       "like 20us (units: ns, us, µs, ms, s)"),
    "bad-bandwidth": (2, "network 'lan': bandwidth '10 Gbps' is not a bandwidth: expected a "
                         "bandwidth like 10Gbit/s (units: bit/s, kbit/s, Kbit/s, Mbit/s, "
                         "Gbit/s, Tbit/s, B/s, kB/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, "
                         "GiB/s, TiB/s)"),
    "bad-hostlist": (6, "host list 'node[01-16': '[' without ']'"),
    "dedicated-compute": (7, "host 'n2': only a gateway can be dedicated (role is 'compute')"),
    "unknown-role": (6, "host 'n1': unknown role 'router'; known: compute, gateway, frontend "
                        "(or login for frontend)"),
    "unknown-technology": (2, "network 'lan': unknown technology 'token-ring'; known: loopback, "
                              "shm, ethernet, fast-ethernet, gigabit-ethernet, infiniband, "
                              "myrinet, sci, wan"),
    "unknown-spawner": (4, "site 'a': unknown spawner 'qsub'; known: local, ssh, slurm, pbs, "
                              "mpiexec, netns"),
    "unknown-scope": (2, "network 'lan': unknown scope 'secret'; known: private, public"),
    "address-outside-subnet": (6, "host 'n1': address 10.2.0.1 is outside network 'lan' "
                                  "subnet 10.1.0.0/24"),
    "negative-slots": (7, "host 'n2': slots must be a whole number >= 0, not -2"),
    "unknown-top-key": (2, "top level: unknown key 'netwroks' (did you mean 'networks'?); "
                           "allowed: defaults, description, links, name, networks, sites"),
    "unknown-host-key": (7, "site 'a': host entry: unknown key 'slot' (did you mean 'slots'?); "
                            "allowed: dedicated, forward_cost, hostname, interfaces, name, "
                            "outbound_only, role, slots"),
    "unknown-link-network": (6, "link sw1--backplane: unknown network 'backplane'"),
    "subnet-full": (2, "network 'lan': subnet 10.0.0.0/30 has no free address left for "
                       "host 'n3'"),
    "sites-unreachable": (12, "site a cannot reach site b: no gateway joins their networks"),
    "compute-joins-sites": (8, "host 'a1' cannot reach host 'b1': no gateway joins their "
                               "networks (host 'x' is on both sides but does not forward: its "
                               "role is 'compute', not 'gateway')"),
    # Limits (coc.topology.limits): each refused before the work it bounds is done.
    "deep-nesting": (4, "the YAML nests more than 64 levels (the limit depth; raise it with "
                        "COC_TOPOLOGY_LIMITS=depth=N)"),
    "alias-bomb-description": (12, "aliases add more than 100000 nodes (the limit alias_nodes; "
                                   "raise it with COC_TOPOLOGY_LIMITS=alias_nodes=N)"),
    "alias-bomb-interfaces": (14, "aliases add more than 100000 nodes (the limit alias_nodes; "
                                  "raise it with COC_TOPOLOGY_LIMITS=alias_nodes=N)"),
    "host-range-too-large": (7, "host list 'n[1-99999999]' stands for 99999999 names, more "
                                "than the limit host_range=1000000 (raise it with "
                                "COC_TOPOLOGY_LIMITS=host_range=N)"),
    "slots-too-many": (8, "host 'n2' has 100000000000000000000 slots, more than the limit "
                          "slots=65536 (raise it with COC_TOPOLOGY_LIMITS=slots=N)"),
    "long-value": (7, "host 'n1': unknown network 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
                      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"),
    # Files that are not UTF-8 text.
    "utf16": (1, "the file is UTF-16 text; save it as UTF-8"),
    "not-utf8": (1, "byte 0xe9 at column 6 is not UTF-8; save the file as UTF-8"),
    "binary": (2, "the file is binary (it holds a NUL byte), not YAML text"),
    # Values the model used to accept or report without a line.
    "address-overflow": (8, "host 'n[1-4]': 4 hosts from address 255.255.255.254 on network "
                            "'wan' run past the last IPv4 address"),
    "null-network": (3, "network 'spare': expected a mapping of keys, not nothing"),
    "top-name-list": (1, "top level: name must be text, not list"),
    # ssh would read these as options (see coc.launcher.spawners.ssh).
    "hostname-option": (8, "host 'n2': hostname '-oProxyCommand=sh' must not begin with '-'"),
    "login-option": (5, "site 'a': login '-oProxyCommand=sh' must not begin with '-'"),
    # Port ranges and outbound-only sites (coc.topology.ports, docs/topology.md).
    "bad-port-range": (2, "network 'lan': port range '41100-41000' is empty: its low end is "
                          "above its high end"),
    "port-ranges-disjoint": (9, "host 'gw': its port ranges do not overlap (network wan "
                                "41000-41100, site a 50000-50100): no port is allowed by all "
                                "of them"),
    "outbound-compute": (7, "host 'n2': only a gateway can be outbound_only (role is "
                            "'compute'); mark its site outbound_only instead"),
    "outbound-not-bool": (5, "site 'a': outbound_only must be true or false, not 'sometimes'"),
    # Encrypted and compressed WAN hops (docs/topology.md "Encryption and compression").
    "bad-compress": (2, "network 'wan': compress must be one of none, zstd, lz4, not 'gzip'"),
    "encrypt-not-bool": (2, "network 'wan': encrypt must be true or false, not 'maybe'"),
}


def test_every_bad_file_is_pinned():
    assert sorted(p.stem for p in BAD.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_bad_file_message(stem):
    line, message = EXPECTED[stem]
    path = BAD / f"{stem}.yaml"
    with pytest.raises(TopologyError) as info:
        load(path)
    where = str(path) if line is None else f"{path}:{line}"
    assert str(info.value) == f"{where}: {message}"
    assert (info.value.file, info.value.line, info.value.message) == (str(path), line, message)


def test_hostlist_error_is_a_topology_error():
    with pytest.raises(HostlistError):
        load(BAD / "bad-hostlist.yaml")


def test_single_gateway_warns_and_is_returned(good):
    with pytest.warns(TopologyWarning, match="single point of failure"):
        G = load(good("two-sites-small"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = validate(G)
    assert found == [
        "site a and site b are joined only through gateway 'a-gw' (single point of failure)",
        "site a and site b are joined only through gateway 'b-gw' (single point of failure)"]
    assert [str(w.message) for w in caught] == found
    assert all(w.category is TopologyWarning for w in caught)


def test_two_gateways_on_one_side_leave_only_the_other_side_fragile(good):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load(good("two-gateways"))
    assert [str(w.message) for w in caught] == [
        "site a and site b are joined only through gateway 'gb' (single point of failure)"]


def test_unused_network_warns():
    with pytest.warns(TopologyWarning, match="network 'spare' is used by no host and no link"):
        loads("networks: {lan: {latency: 1us, bandwidth: 1Gbit/s}, "
              "spare: {latency: 1us, bandwidth: 1Gbit/s}}\n"
              "sites: {a: {hosts: [{name: n1, interfaces: [lan]}]}}\n")


def test_private_networks_may_reuse_addresses_but_public_ones_may_not():
    text = """
networks:
  a-lan: {latency: 1us, bandwidth: 1Gbit/s, subnet: 10.0.0.0/24}
  b-lan: {latency: 1us, bandwidth: 1Gbit/s, subnet: 10.0.0.0/24, scope: %s}
  wan: {latency: 1ms, bandwidth: 1Gbit/s, scope: public}
sites:
  a: {hosts: [{name: a1, interfaces: [a-lan]}, {name: ga, role: gateway, interfaces: [a-lan, wan]}]}
  b: {hosts: [{name: b1, interfaces: [b-lan]}, {name: gb, role: gateway, interfaces: [b-lan, wan]}]}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = loads(text % "private")
        assert G.edges["a1", "a-lan"]["address"] == G.edges["b1", "b-lan"]["address"]
        for net in ("a-lan", "b-lan"):
            G.nodes[net]["scope"] = "public"
        with pytest.raises(TopologyError, match="address 10.0.0.1 on network 'b-lan' is already "
                                                "used by host 'a1' on network 'a-lan'"):
            validate(G)


def test_validate_checks_hand_built_graphs():
    G = loads("networks: {lan: {latency: 1us, bandwidth: 1Gbit/s}}\n"
              "sites: {a: {hosts: [{name: n1, interfaces: [lan]}]}}\n")
    G.nodes["n1"]["slots"] = 2.5
    with pytest.raises(TopologyError, match="host 'n1': slots must be a whole number"):
        validate(G)


def test_many_sites_behind_one_gateway_are_summarised():
    sites = "".join(f"  s{i}: {{hosts: [{{name: s{i}n1, interfaces: [lan{i}]}}, "
                    f"{{name: s{i}gw, role: gateway, interfaces: [lan{i}, wan]}}]}}\n"
                    for i in range(8))
    networks = "".join(f"  lan{i}: {{latency: 1us, bandwidth: 1Gbit/s}}\n" for i in range(8))
    text = ("networks:\n  wan: {latency: 1ms, bandwidth: 1Gbit/s}\n" + networks
            + "sites:\n" + sites)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = validate(loads(text, check=False))
    assert len(found) == 8
    assert found[2] == ("sites s0, s1, s3, s4, s5 and 2 more and site s2 are joined only "
                        "through gateway 's2gw' (single point of failure)")


def test_encrypt_or_compress_inside_one_site_warns():
    with pytest.warns(TopologyWarning, match="network 'lan' is inside site 'a': its "
                      "'encrypt'/'compress' are meant for networks between sites"):
        loads("networks: {lan: {latency: 1us, bandwidth: 1Gbit/s, encrypt: true}}\n"
              "sites: {a: {hosts: [{name: n1, interfaces: [lan]}]}}\n")
