"""Shrink a large topology to a testbed-sized copy that keeps its shape."""

from __future__ import annotations

import networkx as nx

from coc.errors import TestbedError

__all__ = ["scale"]


def scale(G: nx.Graph, k: int) -> nx.Graph:
    """Return a copy of ``G`` keeping at most ``k`` compute hosts per site and switch.

    Compute hosts are grouped by site and by the set of networks they attach to (a switch,
    or for Bunyip a sub-cluster's three switches); the first ``k`` of each group in the
    topology's order stay. Gateways and front-ends always stay, and so does every network
    and link, so routes keep their shape.
    """
    if not isinstance(k, int) or k < 1:
        raise TestbedError(f"--scale must be a whole number of hosts >= 1, not {k!r}")
    kept: dict[tuple, int] = {}
    drop = []
    for host, attrs in G.nodes(data=True):
        if attrs.get("kind") != "host" or attrs.get("role", "compute") != "compute":
            continue
        group = (attrs.get("site"), frozenset(G[host]))
        kept[group] = kept.get(group, 0) + 1
        if kept[group] > k:
            drop.append(host)
    H = G.copy()
    H.remove_nodes_from(drop)
    H.graph["scale"] = k
    return H
