"""Plans (computed without root): names, addresses, routes and scaling of the library files."""

import ipaddress

import pytest

from coc.testbed import TestbedError, names, plan, scale
from coc.topology import from_dict, library_names


@pytest.mark.parametrize("name", library_names())
def test_every_library_topology_has_a_consistent_plan(topology, name):
    p = plan.make_plan(topology(name), "t")
    ports, seen = set(), {}
    for host, h in p["hosts"].items():
        assert h["namespace"] == f"coc:t:{host}"
        for i in h["interfaces"]:
            assert len(i["dev"]) <= names.IFNAMSIZ and len(i["port"]) <= names.IFNAMSIZ
            subnet = ipaddress.ip_network(p["networks"][i["network"]]["subnet"])
            assert ipaddress.ip_address(i["address"]) in subnet
            assert i["prefixlen"] == subnet.prefixlen
            assert (i["network"], i["address"]) not in seen, (host, seen.get(i["address"]))
            seen[i["network"], i["address"]] = host
            assert i["port"] not in ports
            ports.add(i["port"])
    bridges = [n["bridge"] for n in p["networks"].values()]
    assert len(set(bridges)) == len(bridges)


def test_networks_without_subnet_get_a_free_private_one(topology):
    p = plan.make_plan(topology("chemnitz-2003"), "t")
    picked = {n: net["subnet"] for n, net in p["networks"].items() if net["assigned"]}
    assert set(picked) == {"athlon-sci", "xeon-sci", "myrinet"}
    given = [ipaddress.ip_network(net["subnet"]) for net in p["networks"].values()]
    assert all(a == b or not a.overlaps(b) for a in given for b in given)
    assert all(ipaddress.ip_network(s).subnet_of(plan.PRIVATE_POOL) for s in picked.values())


def test_linked_networks_get_on_link_routes(topology):
    p = plan.make_plan(topology("perseus"), "t")
    routes = p["hosts"]["p001"]["routes"]
    assert [r["subnet"] for r in routes] == ["10.0.2.0/24", "10.0.3.0/24", "10.0.4.0/24",
                                             "10.0.5.0/24"]
    assert p["networks"]["backplane"]["subnet"] is None  # no host on it: no addresses
    assert len(p["links"]) == 5
    assert "route add 10.0.2.0/24 dev eth0 scope link" in plan.host_commands(p, "p001")


def test_scale_keeps_k_hosts_per_switch_and_every_gateway(topology):
    perseus = scale(topology("perseus"), 2)
    assert sorted(h for h, d in perseus.nodes(data=True) if d["kind"] == "host") == [
        "p001", "p002", "p025", "p026", "p049", "p050", "p073", "p074", "p097", "p098"]
    bunyip = scale(topology("bunyip"), 3)
    assert sum(d["kind"] == "host" for _, d in bunyip.nodes(data=True)) == 12
    uf = scale(topology("uf-metacluster"), 1)
    assert sorted(h for h, d in uf.nodes(data=True) if d["kind"] == "host") == [
        "acis01", "russell", "zeta01"]
    with pytest.raises(TestbedError, match="--scale"):
        scale(uf, 0)


def test_long_names_are_hashed_to_fit_the_kernel_limit():
    G = from_dict({
        "networks": {"a-very-long-network-name": {"latency": "1us", "bandwidth": "1Gbit/s"}},
        "sites": {"s": {"hosts": [{"name": "a-very-long-host-name", "interfaces": [
            {"network": "a-very-long-network-name", "name": "infiniband-port-0"}]}]}},
    })
    p = plan.make_plan(G, "t")
    i = p["hosts"]["a-very-long-host-name"]["interfaces"][0]
    assert i["name"] == "infiniband-port-0" and len(i["dev"]) == 15
    assert len(i["port"]) == 15 and len(p["networks"]["a-very-long-network-name"]["bridge"]) == 15
    assert p["networks"]["a-very-long-network-name"]["assigned"]


def test_an_address_outside_its_subnet_is_an_error():
    G = from_dict({"networks": {"lan": {"latency": "1us", "bandwidth": "1Gbit/s"}},
                   "sites": {"s": {"hosts": [{"name": "h", "interfaces": ["lan"]}]}}},
                  check=False)
    G.nodes["lan"]["subnet"] = "10.0.0.0/24"
    G.edges["h", "lan"]["address"] = "10.0.1.1"
    with pytest.raises(TestbedError, match="host 'h': address 10.0.1.1 on network 'lan' is "
                                           "outside its subnet 10.0.0.0/24"):
        plan.make_plan(G, "t")


def test_testbed_names_cannot_collide():
    with pytest.raises(TestbedError, match="invalid testbed name"):
        names.check_name("a:b")
    assert names.owned("t", ["coc:t:a", "coc:t2:a"]) == ["coc:t:a"]


def test_shaping_puts_half_the_latency_on_each_end_and_the_link_rate_on_links(topology):
    p = plan.make_plan(topology("perseus"), "t")
    tc = plan.shaping_commands(p, {"tbf": True, "htb": True, "netem": True})
    host = tc["coc:t:p001"]
    assert host[0].startswith("qdisc add dev eth0 root handle 1: tbf rate 100000000bit ")
    assert host[1] == "qdisc add dev eth0 parent 1:1 handle 10: netem delay 30.000us limit 100000"
    infra = tc["coc:t:"]
    end = p["links"][0]["ends"][0]
    assert f"qdisc add dev {end} root handle 1: tbf rate 2100000000bit burst 525000 " \
           "limit 13650000" in infra
    assert f"qdisc add dev {end} parent 1:1 handle 10: netem delay 2.000us limit 100000" in infra
    without_netem = plan.shaping_commands(p, {"tbf": True, "htb": True, "netem": False})
    assert not any("netem" in line for lines in without_netem.values() for line in lines)
