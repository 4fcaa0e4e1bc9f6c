"""Levels and colors as in MPICH-G2: which hosts can talk directly at each level."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import networkx as nx

from coc.topology.hostlist import natural_key
from coc.topology.model import hosts, networks, sites

__all__ = ["LEVELS", "levels"]

LEVELS = ("wan", "site", "network", "host")


def _number(groups: Iterable[Collection[str]],
            rank: Callable[[str], Any] = lambda first: ()) -> dict[str, int]:
    """Number groups of hosts 0, 1, ... by ``rank(first host)``, then the first host's name."""
    ordered = sorted((sorted(group, key=natural_key) for group in groups),
                     key=lambda group: (rank(group[0]), natural_key(group[0])))
    return {h: color for color, group in enumerate(ordered) for h in group}


def _site_groups(G: nx.Graph, members: Iterable[str]) -> Collection[list[str]]:
    """Group the hosts ``members`` of one site by direct reach (see :func:`levels`)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v, d in G.edges(data=True):
        if d["kind"] == "link":
            parent[find(u)] = find(v)
    others = [h for h in members if G.nodes[h]["role"] != "gateway"]
    for h in others:
        nets = list(G[h])
        for net in nets[1:]:
            parent[find(net)] = find(nets[0])
    population: dict[str, int] = {}
    for h in others:
        root = find(next(iter(G[h])))
        population[root] = population.get(root, 0) + 1
    groups: dict[str, list[str]] = {}
    for h in members:
        roots = sorted({find(net) for net in G[h]}, key=natural_key)
        groups.setdefault(max(roots, key=lambda r: population.get(r, 0)), []).append(h)
    return groups.values()


def levels(G: nx.Graph) -> dict[str, dict[str, int]]:
    """Return each host's color at each level of :data:`LEVELS`.

    Colors are small integers, the same for hosts that can talk directly at that level:

    - ``wan``: the connected component of the whole topology (hosts, networks, interfaces,
      links); every host of a valid topology has color 0.
    - ``site``: the index of the host's site in sorted order.
    - ``network``: hosts of one site that reach each other without a gateway: networks
      joined by links form a group, and a host that is not a gateway joins the groups of
      all its networks; a gateway takes the group of its networks where most of its
      site's other hosts are (it forwards between groups but does not merge them).
      Numbered across the whole topology, so it also tells sites apart.
    - ``host``: the index of the host in natural order.

    A program splits a communicator on a level's color to get the ranks it can reach
    directly at that level, as with MPICH-G2's topology colors.

    Parameters
    ----------
    G : Topology

    Returns
    -------
    dict
        ``{host: {"wan": int, "site": int, "network": int, "host": int}}``.

    Examples
    --------
    >>> from coc.topology import load
    >>> colors = levels(load("two-sites"))
    >>> colors["a2"], colors["b-gw"]
    ({'wan': 0, 'site': 0, 'network': 0, 'host': 1}, {'wan': 0, 'site': 1, 'network': 1, 'host': 9})
    """
    all_hosts = hosts(G)
    wan = _number(nx.connected_components(G.subgraph(all_hosts + networks(G))))
    site_index = {site: i for i, site in enumerate(sites(G))}
    groups: list[list[str]] = []
    for site in sites(G):
        groups.extend(_site_groups(G, hosts(G, site=site)))
    network = _number(groups, rank=lambda h: site_index[G.nodes[h]["site"]])
    return {h: {"wan": wan[h], "site": site_index[G.nodes[h]["site"]],
                "network": network[h], "host": i}
            for i, h in enumerate(all_hosts)}
