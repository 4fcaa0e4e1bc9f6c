"""The port range rule of the topology: which ports a host's listening sockets may use.

A topology gives ``port_range`` per site and per network (docs/topology.md, "Port ranges");
:func:`host_port_range` says what that means for one host. Parsing, formatting and binding
live in :mod:`coc.ports`, which ranks import without the topology package.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from coc.errors import TopologyError
from coc.ports import ANY_PORT, format_port_range, parse_port_range
from coc.topology.limits import excerpt

__all__ = ["host_port_range", "parse_port_range", "format_port_range", "ANY_PORT"]


def host_port_range(G: nx.Graph, host: str,
                    override: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """Return the ``(low, high)`` ports ``host``'s listening sockets bind in, or None (any).

    ``override`` (``coc-run --port-range``) wins. Otherwise the range is what every range
    that applies allows: those of the networks the host has an interface on (a listener on
    all interfaces is reachable on each) and its site's.

    Raises
    ------
    TopologyError
        When the ranges that apply do not overlap (naming each, at the host's line).

    Examples
    --------
    >>> from coc.topology import loads
    >>> G = loads('''
    ... networks:
    ...   lan: {latency: 20us, bandwidth: 1Gbit/s}
    ...   wan: {latency: 1ms, bandwidth: 1Gbit/s, port_range: 41000-41100}
    ... sites:
    ...   a: {port_range: 41050-42000, hosts: [{name: gw, role: gateway, interfaces: [lan, wan]},
    ...                                        {name: n1, interfaces: [lan]}]}
    ... ''')
    >>> host_port_range(G, "gw"), host_port_range(G, "n1"), host_port_range(G, "n1", (5, 6))
    ((41050, 41100), (41050, 42000), (5, 6))
    """
    if override is not None:
        return tuple(override)
    attrs = G.nodes[host]
    given = [(f"network {net}", G.nodes[net].get("port_range")) for net in G[host]
             if G.nodes[net].get("kind") == "network"]
    given.append((f"site {attrs['site']}",
                  (G.graph.get("sites", {}).get(attrs["site"]) or {}).get("port_range")))
    ranges = [(where, tuple(r)) for where, r in given if r]
    if not ranges:
        return None
    low = max(r[0] for _, r in ranges)
    high = min(r[1] for _, r in ranges)
    if low > high:
        named = ", ".join(f"{where} {format_port_range(r)}" for where, r in ranges)
        raise TopologyError(f"host {excerpt(host)}: its port ranges do not overlap ({named}): "
                            "no port is allowed by all of them", file=G.graph.get("file"),
                            line=attrs.get("line"), name=host)
    return low, high
