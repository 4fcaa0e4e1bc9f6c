"""Route tables in a compact form (per class of hosts) and gateway sets between sites."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, TypedDict

import networkx as nx

from coc.errors import TopologyError
from coc.topology.hostlist import compress, natural_key
from coc.topology.model import hosts, sites
from coc.topology.routing import DIRECT, _Found, _Model
from coc.topology.units import parse_size

__all__ = ["HostClass", "RouteTables", "route_tables", "gateways", "gateway_sets",
           "LARGE_MESSAGE"]

LARGE_MESSAGE = 1 << 20  # the size the "large" route table is computed for (1 MiB)

#: Next hops with weights summing to 1; the hop None (DIRECT) sends straight to the destination.
Hops = tuple[tuple[Optional[str], float], ...]


class TableEntry(TypedDict):
    """The next hops of one source class: toward each destination site, and toward each
    destination class (an index into :attr:`RouteTables.classes`) that differs from its site."""

    sites: dict[str, Hops]
    classes: dict[int, Hops]


@dataclass(frozen=True)
class HostClass:
    """Hosts that route alike: one site, one role, the same set of networks."""

    site: str
    role: str
    networks: tuple[str, ...]
    hosts: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"site": self.site, "role": self.role, "networks": list(self.networks),
                "hosts": compress(self.hosts)}


def _classes(G: nx.Graph) -> list[HostClass]:
    """Group the hosts of ``G`` into :class:`HostClass` es, in a deterministic order."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for h in hosts(G):
        d = G.nodes[h]
        nets = tuple(sorted(G[h], key=natural_key))
        groups.setdefault((d["site"], d["role"], nets), []).append(h)
    site_order = {site: i for i, site in enumerate(sites(G))}
    return sorted((HostClass(site, role, nets, tuple(members))
                   for (site, role, nets), members in groups.items()),
                  key=lambda c: (site_order[c.site], natural_key(c.hosts[0])))


def _weighted(hops: Mapping[str | None, float]) -> Hops:
    """Turn ``{hop: bottleneck bandwidth}`` into ``((hop, weight), ...)``, weights summing to 1."""
    if len(hops) == 1:
        return ((next(iter(hops)), 1.0),)
    total = sum(hops.values())
    return tuple(sorted(((hop, b / total) for hop, b in hops.items()),
                        key=lambda e: (-e[1], natural_key(e[0] or ""))))


class RouteTables:
    """Next hops for every pair of hosts, stored per class of hosts.

    Hosts with the same site, role and set of networks route alike, so the tables hold,
    for each size class and each source class, the next hops toward each destination
    *site* (the hops most of its hosts get) and, for the classes of that site that differ
    (typically its gateways), toward each such destination *class*. The size grows with the number of classes (sites and gateways), not with the
    number of hosts squared. A next hop is ``(host, weight)``; the host ``None`` in a
    stored entry means "directly to the destination". See ``docs/topology.md``.

    Attributes
    ----------
    size_classes : tuple of int
        The message size each table was computed for.
    labels : tuple of str
        ``("small", "large")`` for two size classes, else the sizes written out.
    classes : list of HostClass
    host_class : dict
        ``{host: index into classes}``.
    entries : list
        Per size class, per source class: ``{"sites": {site: hops}, "classes": {index: hops}}``.
    """

    def __init__(self, size_classes: Sequence[int], labels: Sequence[str],
                 classes: list[HostClass], entries: list[list[TableEntry]]) -> None:
        self.size_classes, self.labels = size_classes, labels
        self.classes, self.entries = classes, entries
        self.host_class = {h: i for i, c in enumerate(classes) for h in c.hosts}

    @property
    def n_entries(self) -> int:
        """The number of stored (source class, destination) entries over all size classes."""
        return sum(len(e["sites"]) + len(e["classes"]) for table in self.entries for e in table)

    def _size_index(self, size: int | str) -> int:
        nbytes = parse_size(size)
        return max(i for i, s in enumerate(self.size_classes) if s <= nbytes or i == 0)

    def next_hops(self, src: str, dst: str, size: int | str = 0) -> list[tuple[str, float]]:
        """Return ``[(next host, weight), ...]`` from host ``src`` toward host ``dst``.

        The table used is that of the largest size class not above ``size``. A next host
        equal to ``dst`` means "send directly".
        """
        if src == dst:
            return []
        for host in (src, dst):
            if host not in self.host_class:
                raise TopologyError(f"unknown host {host!r}", name=host)
        entry = self.entries[self._size_index(size)][self.host_class[src]]
        target = self.host_class[dst]
        hops = entry["classes"].get(target)
        if hops is None:
            hops = entry["sites"][self.classes[target].site]
        return [(dst if hop is DIRECT else hop, w) for hop, w in hops]

    def host_table(self, host: str) -> dict[str, dict[str, list[tuple[str, float]]]]:
        """Return the route table one host needs: ``{label: {dst: [(next hop, weight)]}}``.

        A next hop equal to the destination means "send directly".
        """
        return {label: {dst: self.next_hops(host, dst, size)
                        for dst in self.host_class if dst != host}
                for label, size in zip(self.labels, self.size_classes)}

    def to_dict(self) -> dict[str, Any]:
        """Return the tables as plain data (JSON-ready): classes and per-label entries."""
        def hops(items: Hops) -> list[list[Any]]:
            return [[hop, w] for hop, w in items]

        return {
            "size_classes": dict(zip(self.labels, self.size_classes)),
            "classes": [c.to_dict() for c in self.classes],
            "tables": {label: [{"sites": {s: hops(h) for s, h in e["sites"].items()},
                                "classes": {str(t): hops(h) for t, h in e["classes"].items()}}
                               for e in table]
                       for label, table in zip(self.labels, self.entries)},
        }


def _table(G: nx.Graph, classes: Sequence[HostClass], size: int) -> list[TableEntry]:
    """Compute the entries of one size class."""
    model = _Model(G, size)
    searches: dict[tuple[str, ...], list[_Found]] = {}
    by_site: dict[str, list[int]] = {}
    for index, c in enumerate(classes):
        by_site.setdefault(c.site, []).append(index)
    table = []
    for c in classes:
        if c.networks not in searches:
            searches[c.networks] = model.search(c.networks)
        found = searches[c.networks]
        entry: TableEntry = {"sites": {}, "classes": {}}
        for site, members in by_site.items():
            hops = []
            for t in members:
                arrival = model.arrive(found, classes[t].networks)
                if arrival is None:
                    raise TopologyError(f"host {c.hosts[0]!r} cannot reach host "
                                        f"{classes[t].hosts[0]!r}", file=G.graph.get("file"))
                hops.append(_weighted(arrival[2]))
            # the hops most of the site's hosts get are stored once for the site; the
            # classes that differ (typically its gateways) get an entry of their own
            weight: dict[Hops, int] = {}
            for t, h in zip(members, hops):
                weight[h] = weight.get(h, 0) + len(classes[t].hosts)
            common = max(weight, key=weight.__getitem__)
            entry["sites"][site] = common
            entry["classes"].update((t, h) for t, h in zip(members, hops) if h != common)
        table.append(entry)
    return table


def route_tables(G: nx.Graph, size_classes: Sequence[int | str] = (0, LARGE_MESSAGE)
                 ) -> RouteTables:
    """Compute the route tables of ``G`` for each message size class.

    Routes whose costs are equal (up to rounding: 1e-12 relative) share the load: their
    first hops get weights in proportion to the bottleneck bandwidth of their route.

    Parameters
    ----------
    G : Topology
    size_classes : sequence of int or str, default (0, 1 MiB)
        The message size each table is computed for; a message uses the table of the
        largest size class not above its size.

    Returns
    -------
    RouteTables

    Examples
    --------
    >>> from coc.topology import load
    >>> tables = route_tables(load("two-sites"))
    >>> len(tables.classes), tables.n_entries
    (4, 20)
    >>> tables.next_hops("a1", "b3"), tables.next_hops("a1", "a2")
    ([('a-gw', 1.0)], [('a2', 1.0)])
    >>> tables.host_table("a-gw")["large"]["b1"]
    [('b-gw', 1.0)]
    """
    sizes = tuple(parse_size(s) for s in size_classes)
    if not sizes or list(sizes) != sorted(set(sizes)):
        raise TopologyError(f"size classes must be increasing sizes, not {size_classes!r}")
    labels = ("small", "large") if len(sizes) == 2 else tuple(str(s) for s in sizes)
    classes = _classes(G)
    entries = [_table(G, classes, size) for size in sizes]
    return RouteTables(sizes, labels, classes, entries)


def _site_gateways(G: nx.Graph, tables: RouteTables, site_a: str, site_b: str,
                   size: int | str) -> list[tuple[str, float]]:
    """Aggregate the first hops from ``site_a`` toward ``site_b`` into a gateway set."""
    sources = [i for i, c in enumerate(tables.classes) if c.site == site_a]
    if any(tables.classes[i].role != "gateway" for i in sources):
        sources = [i for i in sources if tables.classes[i].role != "gateway"]
    targets = [i for i, c in enumerate(tables.classes) if c.site == site_b]
    share: dict[str, float] = {}
    for s in sources:
        for t in targets:
            pairs = len(tables.classes[s].hosts) * len(tables.classes[t].hosts)
            dst = tables.classes[t].hosts[0]
            for hop, w in tables.next_hops(tables.classes[s].hosts[0], dst, size):
                if hop != dst:
                    share[hop] = share.get(hop, 0.0) + w * pairs
    total = sum(share.values())
    return [(g, w / total) for g, w in sorted(share.items(),
                                              key=lambda e: (-e[1], natural_key(e[0])))]


def gateways(G: nx.Graph, site_a: str, site_b: str, size: int | str = 0
             ) -> list[tuple[str, float]]:
    """Return the gateway set from ``site_a`` toward ``site_b``: ``[(gateway, weight), ...]``.

    The gateways are the first hops of the cheapest routes from the hosts of ``site_a``
    that are not gateways (all its hosts if it has only gateways) to the hosts of
    ``site_b``; weights are their share of those routes (host pairs, and the bottleneck
    bandwidth among equal-cost routes) and sum to 1. Routes that need no gateway are left
    out, so the list is empty when the sites talk directly.

    Examples
    --------
    >>> from coc.topology import load
    >>> gateways(load("two-sites"), "a", "b")
    [('a-gw', 1.0)]
    """
    for site in (site_a, site_b):
        if site not in sites(G):
            raise TopologyError(f"unknown site {site!r}", file=G.graph.get("file"), name=site)
    tables = route_tables(G, size_classes=(parse_size(size),))
    return _site_gateways(G, tables, site_a, site_b, size)


def gateway_sets(G: nx.Graph, size: int | str = 0
                 ) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Return ``{(site_a, site_b): gateways(G, site_a, site_b)}`` for every ordered pair.

    Examples
    --------
    >>> from coc.topology import load
    >>> gateway_sets(load("two-sites"))[("b", "a")]
    [('b-gw', 1.0)]
    """
    tables = route_tables(G, size_classes=(parse_size(size),))
    return {(a, b): _site_gateways(G, tables, a, b, size)
            for a in sites(G) for b in sites(G) if a != b}
