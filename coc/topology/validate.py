"""Check a topology for mistakes (errors) and fragile spots (warnings) before anything runs."""

from __future__ import annotations

import functools
import ipaddress
import itertools
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import networkx as nx

from coc.errors import TopologyError, TopologyWarning
from coc.topology.hostlist import natural_key
from coc.topology.limits import exceeded, excerpt, limits
from coc.topology.model import ROLES, SCOPES, SPAWNERS, TECHNOLOGIES, hosts, sites
from coc.topology.ports import host_port_range

__all__ = ["validate", "network_components"]


def _fail(G: nx.Graph, message: str, node: str | None = None) -> TopologyError:
    """Return a TopologyError placed at ``node``'s line of the file ``G`` came from."""
    line = None if node is None else G.nodes[node].get("line")
    return TopologyError(message, file=G.graph.get("file"), line=line, name=node)


def _known(G: nx.Graph, where: str, what: str, value: object, known: Collection[str],
           node: str | None = None, note: str = "") -> None:
    """Raise unless ``value`` is one of the ``known`` words, listing them."""
    if value not in known:
        raise _fail(G, f"{where}: unknown {what} {excerpt(value)}; known: {', '.join(known)}{note}",
                    node)


def _number(value: object, minimum: float = 0.0, strict: bool = False) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    return value > minimum if strict else value >= minimum


def _check_networks(G: nx.Graph) -> None:
    for net, a in G.nodes(data=True):   # in file order: the first mistake in the file
        if a["kind"] != "network":
            continue
        where = f"network {excerpt(net)}"
        _known(G, where, "technology", a["technology"], TECHNOLOGIES, net)
        _known(G, where, "scope", a["scope"], SCOPES, net)
        if not _number(a["latency"]):
            raise _fail(G, f"{where}: latency must be a time >= 0", net)
        if not _number(a["bandwidth"], strict=True):
            raise _fail(G, f"{where}: bandwidth must be > 0", net)
    for u, v, d in G.edges(data=True):
        if d["kind"] == "link" and not (_number(d["latency"])
                                        and _number(d["bandwidth"], strict=True)):
            raise _fail(G, f"link {u}--{v}: needs latency >= 0 and bandwidth > 0", u)


def _site_error(G: nx.Graph, site: str, message: str) -> TopologyError:
    """Return a TopologyError placed at the line where ``site`` is defined."""
    return TopologyError(message, file=G.graph.get("file"),
                         line=G.graph.get("site_lines", {}).get(site), name=site)


#: what a hostname or login may hold: DNS letters, IPv6 brackets and colons, no blank
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]%")


def _bad_destination(text: object) -> str | None:
    """Return why ``text`` cannot be a hostname or login host (ssh destination), or None.

    A leading ``-`` would make ssh read it as an option; blanks and other characters would
    change the meaning of a command line.
    """
    if not isinstance(text, str) or not text:
        return "must be a non-empty name"
    if text.startswith("-"):
        return "must not begin with '-'"
    bad = sorted(set(text) - _HOST_CHARS)
    if bad:
        return f"holds {excerpt(bad[0])}; allowed are letters, digits and . - _ : [ ] %"
    return None


def _check_hosts(G: nx.Graph) -> None:
    bound = limits()
    for site, entry in G.graph.get("sites", {}).items():
        entry = entry or {}
        spawner = entry.get("spawner")
        if spawner is not None:
            if spawner not in SPAWNERS:
                raise _site_error(G, site, f"site {excerpt(site)}: unknown spawner "
                                           f"{excerpt(spawner)}; known: {', '.join(SPAWNERS)}")
        login = entry.get("login")
        if login is not None and not (isinstance(login, str) and login in G):
            why = _bad_destination(login)
            if why:
                raise _site_error(G, site, f"site {excerpt(site)}: login {excerpt(login)} {why}")
    for h in hosts(G):
        a = G.nodes[h]
        where = f"host {excerpt(h)}"
        _known(G, where, "role", a["role"], ROLES, h, " (or login for frontend)")
        if not isinstance(a["slots"], int) or isinstance(a["slots"], bool) or a["slots"] < 0:
            raise _fail(G, f"{where}: slots must be a whole number >= 0, not "
                           f"{excerpt(a['slots'])}", h)
        if a["slots"] > bound.slots:
            raise _fail(G, exceeded(f"{where} has", "slots", a["slots"]), h)
        why = _bad_destination(a["hostname"])
        if why:
            raise _fail(G, f"{where}: hostname {excerpt(a['hostname'])} {why}", h)
        if not isinstance(a["dedicated"], bool):
            raise _fail(G, f"{where}: dedicated must be true or false", h)
        if a["dedicated"] and a["role"] != "gateway":
            raise _fail(G, f"{where}: only a gateway can be dedicated (role is "
                           f"{excerpt(a['role'])})", h)
        if not _number(a["forward_cost"]):
            raise _fail(G, f"{where}: forward_cost must be a time >= 0", h)
        if G.degree(h) == 0:
            raise _fail(G, f"{where}: no interface (a host needs at least one network)", h)
        if a.get("outbound_only") and a["role"] != "gateway":
            raise _fail(G, f"{where}: only a gateway can be outbound_only (role is "
                           f"{excerpt(a['role'])}); mark its site outbound_only instead", h)
        host_port_range(G, h)          # the ranges of its networks and site must overlap


def _check_names(G: nx.Graph) -> None:
    """Check hostnames and addresses are unique where they must be, and inside subnets."""
    hostnames: dict[str, str] = {}
    for h in hosts(G):
        hostname = G.nodes[h]["hostname"]
        if hostname in hostnames:
            raise _fail(G, f"host {excerpt(h)}: hostname {excerpt(hostname)} already used by host "
                           f"{excerpt(hostnames[hostname])}", h)
        hostnames[hostname] = h
    # Private networks are separate address spaces (two sites may both use 10.0.0.0/24), but
    # networks joined by links share one, and all public networks share the Internet's.
    space = network_components(G, gateways=False)
    subnets = functools.lru_cache(maxsize=None)(ipaddress.ip_network)
    seen: dict[tuple[str, Any], tuple[str, str]] = {}   # (address space, address) -> user
    for h in hosts(G):
        for net, d in G[h].items():
            if d["address"] is None:
                continue
            net_attrs = G.nodes[net]
            try:
                address = ipaddress.ip_address(d["address"])
            except ValueError:
                raise _fail(G, f"host {excerpt(h)}: {excerpt(d['address'])} is not an IP "
                               f"address", h) from None
            subnet = net_attrs["subnet"]
            if subnet is not None and address not in subnets(subnet):
                raise _fail(G, f"host {excerpt(h)}: address {address} is outside network "
                               f"{excerpt(net)} subnet {subnet}", h)
            key = ("public" if net_attrs["scope"] == "public" else space[net], address)
            if key in seen:
                other, other_net = seen[key]
                raise _fail(G, f"host {excerpt(h)}: address {address} on network "
                               f"{excerpt(net)} is already used by host {excerpt(other)} on "
                               f"network {excerpt(other_net)}", h)
            seen[key] = (h, net)


class _Joins:
    """What joins networks into components: links, and the networks of each gateway."""

    def __init__(self, G: nx.Graph) -> None:
        # Networks nothing attaches to are components of their own: leaving them out keeps
        # the work per gateway proportional to the networks in use (files can list 500 000).
        self.networks = [n for n, d in G.nodes(data=True) if d["kind"] == "network"
                         and G.degree(n)]
        self.links = [(u, v) for u, v, d in G.edges(data=True) if d["kind"] == "link"]
        self.gateways = {h: list(G[h]) for h, d in G.nodes(data=True)
                         if d["kind"] == "host" and d["role"] == "gateway"}

    def components(self, gateways: bool = True, without: str | None = None) -> dict[str, str]:
        parent = {net: net for net in self.networks}

        def find(net: str) -> str:
            while parent[net] != net:
                parent[net] = parent[parent[net]]
                net = parent[net]
            return net

        pairs = list(self.links)
        if gateways:
            for g, nets in self.gateways.items():
                if g != without:
                    pairs.extend((nets[0], other) for other in nets[1:])
        for u, v in pairs:
            parent[find(u)] = find(v)
        return {net: find(net) for net in parent}


def network_components(G: nx.Graph, gateways: bool = True,
                       without: str | None = None) -> dict[str, str]:
    """Return ``{network: component}``: networks joined by links (and gateways) share one.

    Parameters
    ----------
    G : Topology
    gateways : bool, default True
        Also join the networks of each host with role gateway (hosts that forward).
    without : str, optional
        A gateway to leave out, to see what its failure would cut off.

    Returns
    -------
    dict
        Each network mapped to a representative network name of its component.

    Examples
    --------
    >>> from coc.topology import load
    >>> comp = network_components(load("two-sites"))
    >>> comp["a-lan"] == comp["b-lan"] == comp["wan"]
    True
    >>> comp = network_components(load("two-sites"), without="a-gw")
    >>> comp["a-lan"] == comp["wan"]
    False
    """
    comp = {net: net for net, d in G.nodes(data=True) if d["kind"] == "network"}
    comp.update(_Joins(G).components(gateways, without))
    return comp


def _unreachable(G: nx.Graph, comp: dict[str, str],
                 host_list: Iterable[str]) -> tuple[str, str] | None:
    """Return a pair of hosts of ``host_list`` that no route joins, or None."""
    by_set: dict[frozenset[str], str] = {}
    for h in host_list:
        by_set.setdefault(frozenset(comp[net] for net in G[h]), h)
    for (set_a, host_a), (set_b, host_b) in itertools.combinations(by_set.items(), 2):
        if not set_a & set_b:
            return host_a, host_b
    return None


def _hint(G: nx.Graph, comp: dict[str, str], side_a: set[str], side_b: set[str]) -> str:
    """Name a host that is on both sides but does not forward because it is no gateway."""
    for h in hosts(G):
        reach = {comp[net] for net in G[h]}
        if reach & side_a and reach & side_b:
            return (f" (host {excerpt(h)} is on both sides but does not forward: its role is "
                    f"{excerpt(G.nodes[h]['role'])}, not 'gateway')")
    return ""


def _check_reachable(G: nx.Graph) -> None:
    comp = network_components(G)
    reach: dict[str, set[str]] = {}
    for h, d in G.nodes(data=True):
        if d["kind"] == "host":
            reach.setdefault(d["site"], set()).update(comp[net] for net in G[h])
    for a, b in itertools.combinations(sites(G), 2):
        if not reach[a] & reach[b]:
            raise _site_error(G, b, f"site {a} cannot reach site {b}: no gateway joins their "
                                    f"networks" + _hint(G, comp, reach[a], reach[b]))
    pair = _unreachable(G, comp, hosts(G))
    if pair:
        side_a, side_b = ({comp[net] for net in G[h]} for h in pair)
        raise _fail(G, f"host {excerpt(pair[0])} cannot reach host {excerpt(pair[1])}: no "
                       f"gateway joins their networks" + _hint(G, comp, side_a, side_b), pair[0])


def _names(site_group: Iterable[str]) -> str:
    names = sorted(site_group, key=natural_key)
    if len(names) == 1:
        return f"site {names[0]}"
    shown = ", ".join(names[:5])
    return f"sites {shown}" + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _single_points_of_failure(G: nx.Graph) -> Iterator[str]:
    """Yield a warning text for each gateway whose loss would split the sites."""
    joins = _Joins(G)
    site_networks: dict[str, dict[str, int]] = {}  # site -> {network: the site's hosts on it}
    for h, d in G.nodes(data=True):
        if d["kind"] == "host":
            counts = site_networks.setdefault(d["site"], {})
            for net in G[h]:
                counts[net] = counts.get(net, 0) + 1
    ordered = sorted(site_networks, key=natural_key)
    for g in sorted(joins.gateways, key=natural_key):
        comp = joins.components(without=g)
        home, own = G.nodes[g]["site"], set(joins.gateways[g])
        groups = _site_groups(ordered, site_networks, comp,
                              lambda site, net, count: site == home and count == 1
                              and net in own)
        if len(groups) > 1:
            named = " and ".join(_names(sites_of) for sites_of in groups)
            yield (f"{named} are joined only through gateway {excerpt(g)} "
                   f"(single point of failure)")


def _site_groups(ordered: Sequence[str], site_networks: dict[str, dict[str, int]],
                 comp: dict[str, str],
                 left_out: Callable[[str, str, int], bool]) -> list[list[str]]:
    """Return the sites grouped by the network components they reach, in ``ordered`` order.

    Sites that reach a common component are in one group; ``left_out(site, network, count)``
    says which of a site's networks do not count. Union-find: linear in site--network pairs.
    """
    parent = {site: site for site in ordered}

    def find(site: str) -> str:
        while parent[site] != site:
            parent[site] = parent[parent[site]]
            site = parent[site]
        return site

    first: dict[str, str] = {}  # component -> the first site that reaches it
    for site in ordered:
        for net, count in site_networks[site].items():
            if left_out(site, net, count):
                continue
            other = first.setdefault(comp[net], site)
            if other != site:
                parent[find(site)] = find(other)
    groups: dict[str, list[str]] = {}   # in the order of each group's first site
    for site in ordered:
        groups.setdefault(find(site), []).append(site)
    return list(groups.values())


def validate(G: nx.Graph) -> list[str]:
    """Check a topology; raise on the first error, return (and issue) its warnings.

    Errors: unknown technology, scope, role or spawner; slots not a whole number >= 0;
    ``dedicated`` on a host that is not a gateway; a host with no interface; a hostname or
    an address used twice (addresses per address space: each private network with the
    networks linked to it, and all public networks together); an address outside its
    network's subnet; two sites, or two hosts, that no route joins.
    Warnings: a gateway whose loss would split the sites (single point of failure); a
    network no host and no link uses (one warning for all of them when there are more
    than five); ``encrypt`` or ``compress`` on a network inside one site (it costs CPU
    there and protects nothing that leaves the site).

    Parameters
    ----------
    G : Topology

    Returns
    -------
    list of str
        The warnings, each also issued as a :class:`coc.errors.TopologyWarning`.

    Raises
    ------
    TopologyError
        Naming file, line and the host, network or site concerned.

    Examples
    --------
    >>> import warnings
    >>> from coc.topology import load
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     found = validate(load("two-sites", check=False))
    >>> found[0]
    "site a and site b are joined only through gateway 'a-gw' (single point of failure)"
    """
    _check_networks(G)
    _check_hosts(G)
    _check_names(G)
    _check_reachable(G)
    found = list(_single_points_of_failure(G))
    found += [f"network {excerpt(net)} is inside site {excerpt(d['site'])}: its 'encrypt'/"
              f"'compress' are meant for networks between sites (WAN hops)"
              for net, d in G.nodes(data=True) if d["kind"] == "network" and d["site"]
              and (d.get("encrypt") or d.get("compress", "none") != "none")]
    unused = [net for net, d in G.nodes(data=True) if d["kind"] == "network" and not G[net]]
    if len(unused) > 5:   # one warning, not one per network (a file may list thousands)
        found.append(f"{len(unused)} networks are used by no host and no link (in file "
                     f"order): "
                     f"{', '.join(excerpt(net) for net in unused[:5])} and "
                     f"{len(unused) - 5} more")
    else:
        found += [f"network {excerpt(net)} is used by no host and no link"
                  for net in sorted(unused, key=natural_key)]
    for message in found:
        warnings.warn(TopologyWarning(message), stacklevel=2)
    return found
