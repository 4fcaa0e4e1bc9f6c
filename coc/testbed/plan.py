"""Turn a topology into a testbed plan: namespaces, bridges, veths, addresses, routes, qdiscs.

A plan is plain JSON-able data (it becomes the recorded state), computed without touching the
system, so every naming and addressing decision is testable without root:

- one namespace per host (``coc:<testbed>:<host>``) and one "infrastructure" namespace
  (``coc:<testbed>:``) holding a bridge per network; nothing is put in the root namespace;
- one veth per interface: the topology's interface name (``eth0``) inside the host's
  namespace, the other end (``<host>.<interface>``) a port of the network's bridge;
- a veth pair between two bridges for each link, and on-link routes so hosts on linked
  networks talk directly, as the topology says they can;
- addresses from the topology; a network without a subnet gets one from 172.16.0.0/12
  (recorded as ``assigned``), and interfaces without an address the next free one.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterator, Sequence
from typing import Any, Optional, TypedDict, Union

import networkx as nx

from coc.testbed import names, shaping
from coc.errors import TestbedError

__all__ = ["make_plan", "namespaces", "infra_commands", "host_commands", "shaping_commands"]

PRIVATE_POOL = ipaddress.ip_network("172.16.0.0/12")

_Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
_Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


class InterfacePlan(TypedDict):
    """One interface of a host: its name and device in the host's namespace, its network and
    address, and the bridge port that carries it in the infrastructure namespace."""

    name: str
    dev: str
    network: str
    address: str
    prefixlen: int
    port: str


class RoutePlan(TypedDict):
    """An on-link route to a network joined by links to one the host is on."""

    subnet: str
    dev: str


class _HostPlanBase(TypedDict):
    namespace: str
    site: Optional[str]
    role: str
    interfaces: list[InterfacePlan]
    routes: list[RoutePlan]


class HostPlan(_HostPlanBase, total=False):
    """One host: its namespace, site, role, interfaces and routes; ``outside`` lists the
    devices of an outbound-only host that accept no inbound connections."""

    outside: list[str]


class NetworkPlan(TypedDict):
    """One network: its bridge, subnet (``assigned`` when the testbed chose it) and shaping."""

    bridge: str
    subnet: Optional[str]
    assigned: bool
    site: Optional[str]
    technology: Optional[str]
    bandwidth: Optional[float]
    latency: Optional[float]


class LinkPlan(TypedDict):
    """A link between two networks' bridges: the veth pair's two ends and its shaping."""

    between: list[str]
    ends: list[str]
    bandwidth: Optional[float]
    latency: Optional[float]


class Plan(TypedDict):
    """What a testbed is made of; saved as its recorded state (with the phase and timings)."""

    name: str
    topology: Optional[str]
    file: Optional[str]
    infra: str
    hosts: dict[str, HostPlan]
    networks: dict[str, NetworkPlan]
    links: list[LinkPlan]


def _of_kind(G: nx.Graph, kind: str) -> list[str]:
    return [n for n, d in G.nodes(data=True) if d.get("kind") == kind]


def _interfaces(G: nx.Graph, host: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (network, edge attrs) for each interface of ``host``, in the graph's order."""
    for net in G[host]:
        attrs = G.edges[host, net]
        if attrs.get("kind") == "interface":
            yield net, attrs


def _members(G: nx.Graph, network: str) -> list[tuple[str, dict[str, Any]]]:
    return [(h, G.edges[h, network]) for h in G[network]
            if G.edges[h, network].get("kind") == "interface"]


def _free_block(size: int, used: Sequence[_Network]) -> _Network:
    """Return the first block of 172.16.0.0/12 for ``size`` hosts that overlaps nothing used."""
    prefixlen = min(24, 32 - math.ceil(math.log2(size + 2)))
    for block in PRIVATE_POOL.subnets(new_prefix=prefixlen):
        if not any(block.overlaps(u) for u in used):
            return block
    raise TestbedError(f"no free block of {PRIVATE_POOL} for {size} addresses")


def _subnet_around(addresses: Sequence[_Address], size: int,
                   used: Sequence[_Network]) -> _Network:
    """Return the smallest block of at least /24 that holds ``addresses`` and ``size`` hosts."""
    first = addresses[0]
    for prefixlen in range(24, 7, -1):
        block = ipaddress.ip_network(f"{first}/{prefixlen}", strict=False)
        if block.num_addresses >= size + 2 and all(a in block for a in addresses) \
                and not any(block.overlaps(u) for u in used):
            return block
    raise TestbedError(f"no free subnet holds the addresses {', '.join(map(str, addresses))}")


def _subnets(G: nx.Graph) -> dict[str, tuple[_Network, bool]]:
    """Return {network: (ip_network, assigned)} for every network with interfaces."""
    result: dict[str, tuple[_Network, bool]] = {}
    used = [ipaddress.ip_network(s, strict=False)
            for n in _of_kind(G, "network") if (s := G.nodes[n].get("subnet"))]
    for net in _of_kind(G, "network"):
        members = _members(G, net)
        subnet = G.nodes[net].get("subnet")
        if subnet:
            result[net] = (ipaddress.ip_network(subnet, strict=False), False)
        elif members:
            given = [ipaddress.ip_address(e["address"]) for _, e in members if e.get("address")]
            block = (_subnet_around(given, len(members), used) if given
                     else _free_block(len(members), used))
            used.append(block)
            result[net] = (block, True)
    return result


def _addresses(G: nx.Graph, net: str, subnet: _Network) -> dict[str, str]:
    """Return {host: address} for the interfaces on ``net``, filling in the unaddressed ones."""
    members = _members(G, net)
    taken: dict[str, _Address | None] = {}
    for host, edge in members:
        if edge.get("address"):
            address = ipaddress.ip_address(edge["address"])
            if address not in subnet:
                raise TestbedError(f"host {host!r}: address {address} on network {net!r} is "
                                   f"outside its subnet {subnet}")
            taken[host] = address
    given = set(taken.values())
    free = (a for a in subnet.hosts() if a not in given)
    for host, _ in members:
        if host not in taken:
            taken[host] = next(free, None)
            if taken[host] is None:
                raise TestbedError(f"network {net!r}: subnet {subnet} has no free address "
                                   f"left for host {host!r}")
    return {h: str(a) for h, a in taken.items()}


def _linked(G: nx.Graph, net: str) -> set[str]:
    """Return the networks joined to ``net`` by links (directly or through other links)."""
    links: nx.Graph = nx.Graph((a, b) for a, b, d in G.edges(data=True) if d.get("kind") == "link")
    return nx.node_connected_component(links, net) - {net} if net in links else set()


def _host_plan(G: nx.Graph, name: str, host: str, subnets: dict[str, tuple[_Network, bool]],
               addresses: dict[str, dict[str, str]]) -> HostPlan:
    interfaces: list[InterfacePlan] = []
    for index, (net, edge) in enumerate(_interfaces(G, host)):
        label = edge.get("name") or f"eth{index}"
        subnet = subnets[net][0]
        interfaces.append({
            "name": label,
            "dev": names.ifname(label, host),
            "network": net,
            "address": addresses[net][host],
            "prefixlen": subnet.prefixlen,
            "port": names.port(host, label),
        })
    attached = {i["network"] for i in interfaces}
    routes: list[RoutePlan] = []
    seen: set[str] = set()
    for i in interfaces:
        for other in sorted(_linked(G, i["network"]) - attached):
            if other in subnets and str(subnets[other][0]) not in seen:
                seen.add(str(subnets[other][0]))
                routes.append({"subnet": str(subnets[other][0]), "dev": i["dev"]})
    attrs = G.nodes[host]
    site = (G.graph.get("sites", {}).get(attrs.get("site")) or {})
    outside = []          # an outbound_only host's interfaces on networks of other sites
    if attrs.get("outbound_only") or site.get("outbound_only"):
        outside = [i["dev"] for i in interfaces
                   if G.nodes[i["network"]].get("site") != attrs.get("site")]
    plan: HostPlan = {
        "namespace": names.host_namespace(name, host),
        "site": attrs.get("site"),
        "role": attrs.get("role", "compute"),
        "interfaces": interfaces,
        "routes": routes,
    }
    if outside:
        plan["outside"] = outside
    return plan


def make_plan(G: nx.Graph, name: str) -> Plan:
    """Return the plan (a JSON-able dict) that builds topology ``G`` as testbed ``name``.

    Raises :class:`TestbedError` when an address falls outside its subnet or a subnet is full.
    """
    names.check_name(name)
    subnets = _subnets(G)
    addresses = {net: _addresses(G, net, subnet) for net, (subnet, _) in subnets.items()}
    networks: dict[str, NetworkPlan] = {}
    for net in _of_kind(G, "network"):
        attrs = G.nodes[net]
        subnet: _Network | None
        subnet, assigned = subnets.get(net, (None, False))
        networks[net] = {
            "bridge": names.bridge(net),
            "subnet": None if subnet is None else str(subnet),
            "assigned": assigned,
            "site": attrs.get("site"),
            "technology": attrs.get("technology"),
            "bandwidth": attrs.get("bandwidth"),
            "latency": attrs.get("latency"),
        }
    links: list[LinkPlan] = [{"between": [a, b], "ends": list(names.link_ends(a, b)),
              "bandwidth": d.get("bandwidth"), "latency": d.get("latency")}
             for a, b, d in G.edges(data=True) if d.get("kind") == "link"]
    return {
        "name": name,
        "topology": G.graph.get("name"),
        "file": None if G.graph.get("file") is None else str(G.graph["file"]),
        "infra": names.infra_namespace(name),
        "hosts": {h: _host_plan(G, name, h, subnets, addresses) for h in _of_kind(G, "host")},
        "networks": networks,
        "links": links,
    }


def namespaces(plan: Plan) -> list[str]:
    """Return every namespace of ``plan``, the infrastructure namespace first."""
    return [plan["infra"]] + [h["namespace"] for h in plan["hosts"].values()]


def infra_commands(plan: Plan) -> list[str]:
    """Return the ``ip`` lines that make bridges and veths (run in the infrastructure namespace)."""
    lines = ["link set lo up"]
    for net in plan["networks"].values():
        lines += [f"link add {net['bridge']} type bridge forward_delay 0 stp_state 0",
                  f"link set {net['bridge']} up"]
    for host in plan["hosts"].values():
        for i in host["interfaces"]:
            bridge = plan["networks"][i["network"]]["bridge"]
            lines += [f"link add {i['port']} type veth peer name {i['dev']} "
                      f"netns {host['namespace']}",
                      f"link set {i['port']} master {bridge} up"]
    for link in plan["links"]:
        (a, b), (end_a, end_b) = link["between"], link["ends"]
        lines += [f"link add {end_a} type veth peer name {end_b}",
                  f"link set {end_a} master {plan['networks'][a]['bridge']} up",
                  f"link set {end_b} master {plan['networks'][b]['bridge']} up"]
    return lines


def host_commands(plan: Plan, host: str) -> list[str]:
    """Return the ``ip`` lines, run in ``host``'s namespace, that address and raise its links."""
    h = plan["hosts"][host]
    lines = ["link set lo up"]
    for i in h["interfaces"]:
        lines += [f"addr add {i['address']}/{i['prefixlen']} dev {i['dev']}",
                  f"link set {i['dev']} up"]
    lines += [f"route add {r['subnet']} dev {r['dev']} scope link" for r in h["routes"]]
    return lines


def shaping_commands(plan: Plan, offered: dict[str, bool]) -> dict[str, list[str]]:
    """Return {namespace: tc lines} shaping every veth end as its network or link says.

    Both ends of an interface's veth get the network's bandwidth (host-to-network on the host
    end, network-to-host on the bridge end) and half its latency each; both ends of a link
    get the link's bandwidth and latency.
    """
    result: dict[str, list[str]] = {plan["infra"]: []}
    for host in plan["hosts"].values():
        lines = result.setdefault(host["namespace"], [])
        for i in host["interfaces"]:
            net = plan["networks"][i["network"]]
            half = (net["latency"] or 0) / 2
            lines += shaping.qdisc_commands(i["dev"], net["bandwidth"], half, offered)
            result[plan["infra"]] += shaping.qdisc_commands(i["port"], net["bandwidth"], half,
                                                            offered)
    for link in plan["links"]:
        for end in link["ends"]:
            result[plan["infra"]] += shaping.qdisc_commands(end, link["bandwidth"],
                                                            link["latency"], offered)
    return {ns: lines for ns, lines in result.items() if lines}
