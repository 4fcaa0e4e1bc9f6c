"""Routes between hosts under coc's cost model: the cheapest path for a message size."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import networkx as nx

from coc.errors import TopologyError
from coc.topology.hostlist import natural_key
from coc.topology.units import format_size, format_time

__all__ = ["Hop", "Route", "Direct", "route", "route_cost", "message_time", "DIRECT", "TIE",
           "FRAGMENT", "EAGER_LIMIT"]

DIRECT = None  # the "first hop" of a path that passes no gateway: straight to the destination
TIE = 1e-12  # relative difference below which two path costs count as equal
#: The unit of cut-through forwarding: the engine's default fragment (256 KiB). A gateway
#: forwards a fragment as soon as it has it, so hops overlap in fragments of this size.
FRAGMENT = 256 << 10
#: The engine's default eager limit: larger messages go by rendezvous (RTS, CTS, then DATA).
EAGER_LIMIT = 128 << 10
#: The unit switches forward in (an Ethernet frame): inside one hop, networks joined by
#: links pipeline the message in packets of this size, not in fragments.
PACKET = 1500

#: First hops of the cheapest paths to a node: ``{gateway or DIRECT: bottleneck bandwidth}``.
_FirstHops = dict[Optional[str], float]
#: What :meth:`_Costs.search` finds: cost, predecessor and first hops of each node reached.
_Found = tuple[dict[str, float], dict[str, Optional[str]], dict[str, _FirstHops]]


@dataclass(frozen=True)
class Hop:
    """One hop of a route: ``host`` sends to ``next_host`` over ``network``.

    ``networks`` lists every network crossed when networks joined by links are used
    (``network`` is the first of them); ``time`` is what the hop alone takes for the whole
    message (latency + size / bandwidth of each network and link), including the forwarding
    cost of ``host`` when it is a gateway in the middle of the route. Gateways forward
    fragment by fragment, so the hops of a route overlap: the route's time is less than the
    sum of its hops' times for messages above one fragment (see :func:`route`).
    """

    host: str
    network: str
    next_host: str
    time: float
    networks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Route:
    """The cheapest route for a message of ``size`` bytes; ``time`` is its estimate in seconds."""

    hops: tuple[Hop, ...]
    time: float
    size: int = 0
    src: str | None = field(default=None, compare=False)

    @property
    def hosts(self) -> tuple[str | None, ...]:
        """The hosts of the route: source, gateways in order, destination."""
        if not self.hops:
            return (self.src, self.src)
        return (self.hops[0].host,) + tuple(hop.next_host for hop in self.hops)

    @property
    def gateways(self) -> tuple[str, ...]:
        """The gateways that forward the message, in order."""
        return tuple(hop.next_host for hop in self.hops[:-1])

    def __str__(self) -> str:
        lines = [f"{hop.host} -> {hop.next_host} over {'+'.join(hop.networks)} "
                 f"{format_time(hop.time, 3)}" for hop in self.hops]
        lines.append(f"total {format_time(self.time, 3)} for {format_size(self.size)}")
        return "\n".join(lines)


class _Costs:
    """The topology reduced to networks and gateways, with every cost for one message size.

    The cost of entering a network from a host (the source or a gateway) is
    ``latency + min(size, fragment) / bandwidth``: the first fragment's trip; crossing a
    link, and the network behind it, costs ``latency + min(size, PACKET) / bandwidth``, as
    switches pass the message on packet by packet. Only networks and links of at least
    ``floor`` bandwidth are kept, so a path found has a bottleneck of at least ``floor`` and
    the rest of the message, ``max(0, size - fragment)``, streams behind the first fragment
    in at most ``rest / floor`` (see :class:`_Model`).
    """

    def __init__(self, G: nx.Graph, size: int, floor: float = 0.0,
                 fragment: int = FRAGMENT) -> None:
        self.size, self.floor = size, floor
        self.rest = max(0, size - fragment)
        head, packet = min(size, fragment), min(size, PACKET)
        self.cost: dict[str, float] = {}      # entering a network from a host
        self.through: dict[str, float] = {}   # crossing a network reached by a link
        self.whole: dict[str, float] = {}     # the whole message over a network
        self.bandwidth: dict[str, float] = {}
        self.links: dict[str, list[tuple[str, float, float]]] = {}  # (other, cost, bandwidth)
        self.gateways: dict[str, list[str]] = {}
        for net, d in G.nodes(data=True):
            if d["kind"] == "network" and d["bandwidth"] >= floor:
                self.cost[net] = d["latency"] + head / d["bandwidth"]
                self.through[net] = d["latency"] + packet / d["bandwidth"]
                self.whole[net] = d["latency"] + size / d["bandwidth"]
                self.bandwidth[net] = d["bandwidth"]
                self.links[net], self.gateways[net] = [], []
        self.host_networks: dict[str, list[str]] = {}
        self.forward_cost: dict[str, float] = {}
        for h, d in G.nodes(data=True):
            if d["kind"] == "host":
                self.host_networks[h] = [net for net in G[h] if net in self.cost]
                if d["role"] == "gateway":
                    self.forward_cost[h] = d["forward_cost"]
                    for net in self.host_networks[h]:
                        self.gateways[net].append(h)
        self.link_whole: dict[tuple[str, str], float] = {}
        for u, v, d in G.edges(data=True):
            if d["kind"] == "link" and u in self.cost and v in self.cost \
                    and d["bandwidth"] >= floor:
                cost = d["latency"] + packet / d["bandwidth"]
                self.links[u].append((v, cost, d["bandwidth"]))
                self.links[v].append((u, cost, d["bandwidth"]))
                self.link_whole[u, v] = self.link_whole[v, u] = \
                    d["latency"] + size / d["bandwidth"]

    def tail(self, bottleneck: float) -> float:
        """Return the time the rest of the message takes behind its first fragment."""
        return self.rest / bottleneck if self.rest else 0.0

    def search(self, start: Iterable[str], tolerance: float = TIE,
               forward: bool = True) -> _Found:
        """Run Dijkstra from the networks ``start`` (the source host's networks).

        Returns ``(dist, pred, first)``: the cost of reaching each network (after crossing
        it) or gateway (after forwarding), its predecessor on one cheapest path, and its
        *first hops* ``{gateway or DIRECT: bottleneck bandwidth}`` over all paths within
        ``tolerance`` of the cheapest. Gateways whose networks are all in ``start`` are
        never used: the source reaches their networks directly; with ``forward=False``
        no gateway is used (what the source reaches directly).
        """
        start = frozenset(net for net in start if net in self.cost)
        dist: dict[str, float] = {}
        pred: dict[str, str | None] = {}
        first: dict[str, _FirstHops] = {}
        done: set[str] = set()
        heap: list[tuple[float, int, str]] = []
        counter = itertools.count()

        def relax(node: str, d: float, parent: str | None, hops: _FirstHops) -> None:
            old = dist.get(node)
            if old is None or d < old * (1 - tolerance):
                dist[node], pred[node], first[node] = d, parent, hops
                heapq.heappush(heap, (d, next(counter), node))
            elif node not in done and d <= old * (1 + tolerance):
                merged = first[node]
                for hop, bottleneck in hops.items():
                    merged[hop] = max(merged.get(hop, 0.0), bottleneck)
                if d < old:  # cheaper by a rounding error: settle it at the lower cost
                    dist[node], pred[node] = d, parent
                    heapq.heappush(heap, (d, next(counter), node))

        for net in sorted(start, key=natural_key):
            relax(net, self.cost[net], None, {DIRECT: self.bandwidth[net]})
        unused = {g for net in start for g in self.gateways[net]
                  if start.issuperset(self.host_networks[g])} if forward else set()
        while heap:
            d, _, node = heapq.heappop(heap)
            if node in done or d > dist[node]:
                continue
            done.add(node)
            hops = first[node]
            if node in self.cost:  # a network: cross a link, or enter a gateway
                for other, cost, bandwidth in self.links[node]:
                    if other not in done:
                        limit = min(bandwidth, self.bandwidth[other])
                        relax(other, d + cost + self.through[other], node,
                              {hop: min(b, limit) for hop, b in hops.items()})
                for g in self.gateways[node] if forward else ():
                    if g in done or g in unused:
                        continue
                    entered: _FirstHops = {}
                    for hop, b in hops.items():
                        key = g if hop is DIRECT else hop
                        entered[key] = max(entered.get(key, 0.0), b)
                    relax(g, d + self.forward_cost[g], node, entered)
            else:  # a gateway: forward onto one of its other networks
                for other in self.host_networks[node]:
                    if other not in done:
                        relax(other, d + self.cost[other], node,
                              {hop: min(b, self.bandwidth[other]) for hop, b in hops.items()})
        return dist, pred, first

    @staticmethod
    def arrive(found: _Found, networks: Iterable[str],
               tolerance: float = TIE) -> tuple[float, str, _FirstHops] | None:
        """Return ``(cost, best network, first hops)`` for a host on ``networks``, or None."""
        dist, _, first = found
        reached = [(dist[net], net) for net in networks if net in dist]
        if not reached:
            return None
        best, net = min(reached)
        hops: _FirstHops = {}
        for d, other in reached:
            if d <= best * (1 + tolerance):
                for hop, b in first[other].items():
                    hops[hop] = max(hops.get(hop, 0.0), b)
        return best, net, hops


class _Model:
    """The cost model for one message size: the cheapest path under cut-through forwarding.

    A message crosses a path in ``sum(latency + min(size, fragment) / bandwidth)`` over its
    networks and links, plus each gateway's forwarding cost, plus ``rest / bottleneck`` for
    the rest of the message behind the first fragment. The bottleneck term is not a sum over
    edges, so the search runs once per *floor* (each bandwidth of the topology): with only
    networks and links of at least that bandwidth, the first-fragment cost is a sum for
    Dijkstra, and the floor bounds the bottleneck. The cheapest path over all floors is the
    cheapest path under the model (the floor equal to its bottleneck finds it at its cost).
    Messages of at most one fragment need one search (nothing streams behind).
    """

    def __init__(self, G: nx.Graph, size: int, fragment: int = FRAGMENT) -> None:
        first = _Costs(G, size, 0.0, fragment)
        if not first.rest:
            self.layers = [first]
            return
        floors = {d["bandwidth"] for _, d in G.nodes(data=True) if d["kind"] == "network"}
        floors |= {d["bandwidth"] for _, _, d in G.edges(data=True) if d["kind"] == "link"}
        self.layers = [_Costs(G, size, floor, fragment) for floor in sorted(floors)]

    @property
    def host_networks(self) -> dict[str, list[str]]:
        return self.layers[0].host_networks

    def search(self, start: Iterable[str], forward: bool = True) -> list[_Found]:
        """Run :meth:`_Costs.search` on every layer; return the results in layer order."""
        return [layer.search(start, forward=forward) for layer in self.layers]

    def arrive(self, founds: Sequence[_Found], networks: Sequence[str], tolerance: float = TIE
               ) -> tuple[float, str, _FirstHops, _Costs, _Found] | None:
        """Return ``(time, best network, first hops, layer, found)`` for a host, or None.

        First hops of paths within ``tolerance`` of the cheapest, over every layer, share
        the load (their bottleneck bandwidths become the weights).
        """
        reached = []
        for layer, found in zip(self.layers, founds):
            arrival = layer.arrive(found, networks, tolerance)
            if arrival is not None:
                reached.append((arrival[0] + layer.tail(layer.floor), arrival, layer, found))
        if not reached:
            return None
        best = min(r[0] for r in reached)
        time, (_, net, _), layer, found = next(r for r in reached if r[0] == best)
        hops: _FirstHops = {}
        for total, arrival, _, _ in reached:
            if total <= best * (1 + tolerance):
                for hop, b in arrival[2].items():
                    hops[hop] = max(hops.get(hop, 0.0), b)
        return time, net, hops, layer, found


class Direct:
    """Cheapest direct steps (no gateway in between) from one host to another, for one size.

    The plan asks it which network a hop uses, so each hop dials its peer's address on that
    network; searches are kept per set of source networks (hosts of a class share them).

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("chemnitz-2003")
    >>> Direct(G, "1MiB").network("athlon1", "xeon8"), Direct(G).network("athlon1", "xeon3")
    ('myrinet', 'admin')
    """

    def __init__(self, G: nx.Graph, size: int | str = 0) -> None:
        from coc.topology.units import parse_size

        self.G, self.model = G, _Model(G, parse_size(size))
        self._found: dict[tuple[str, ...], list[_Found]] = {}
        self._zero: _Costs | None = None

    def step(self, a: str, b: str) -> tuple[float, str, _Costs, _Found] | None:
        """Return ``(time, network of b it arrives on, layer, found)``, or None if none."""
        _check_host(self.G, a)
        _check_host(self.G, b)
        nets = tuple(self.model.host_networks[a])
        if nets not in self._found:
            self._found[nets] = self.model.search(nets, forward=False)
        arrival = self.model.arrive(self._found[nets], self.model.host_networks[b])
        return None if arrival is None else (arrival[0], arrival[1], arrival[3], arrival[4])

    def network(self, a: str, b: str) -> str | None:
        """Return the network of ``b`` that ``a`` sends to directly, or None if it cannot."""
        step = self.step(a, b)
        return None if step is None else step[1]

    def latency(self, a: str, network: str) -> float | None:
        """Return the latency from host ``a`` onto ``network`` (its own or a linked one), or None.

        The sum of the latencies of the networks and links on the lowest-latency way there.
        """
        if self._zero is None:
            self._zero = _Costs(self.G, 0)
        return self._zero.search(self._zero.host_networks[a], forward=False)[0].get(network)


def _check_host(G: nx.Graph, host: str) -> None:
    if host not in G or G.nodes[host].get("kind") != "host":
        raise TopologyError(f"unknown host {host!r}", file=G.graph.get("file"), name=host)


def _segments(costs: _Costs, src: str, dst: str, path: Sequence[str]) -> tuple[Hop, ...]:
    """Cut a node path (networks and gateways) into hops between hosts."""
    hops: list[Hop] = []
    host, nets = src, list[str]()

    def close(next_host: str) -> None:
        time = sum(costs.whole[net] for net in nets)
        time += sum(costs.link_whole[a, b] for a, b in zip(nets, nets[1:]))
        if host != src:
            time += costs.forward_cost[host]
        hops.append(Hop(host, nets[0], next_host, time, tuple(nets)))

    for node in path:
        if node in costs.cost:
            nets.append(node)
        else:
            close(node)
            host, nets = node, []
    close(dst)
    return tuple(hops)


def route(G: nx.Graph, src: str, dst: str, size: int | str = 0) -> Route:
    """Return the cheapest route from host ``src`` to host ``dst`` for ``size`` bytes.

    Gateways forward cut-through, fragment by fragment (:data:`FRAGMENT`), so the time of
    a route is the first fragment's trip plus the rest of the message at the route's
    bottleneck bandwidth::

        sum(latency + min(size, FRAGMENT) / bandwidth)   over its networks and links
        + sum(forward_cost)                               over the gateways it passes
        + max(0, size - FRAGMENT) / bottleneck bandwidth

    (store-and-forward for messages of one fragment or less). Only hosts with role gateway
    forward, so they are the only hosts inside a route. Small messages therefore favour low
    latency and large ones high bandwidth. See docs/topology.md, "Cost model".

    Parameters
    ----------
    G : Topology
    src, dst : str
        Host names.
    size : int or str, default 0
        Message size in bytes, or a size such as ``"4MiB"``.

    Returns
    -------
    Route

    Raises
    ------
    TopologyError
        If a host is unknown or no route joins them.

    Examples
    --------
    >>> from coc.topology import load
    >>> r = route(load("two-sites"), "a1", "b2")
    >>> r.hosts, r.gateways
    (('a1', 'a-gw', 'b-gw', 'b2'), ('a-gw', 'b-gw'))
    >>> [hop.network for hop in r.hops], round(r.time * 1e6, 3)
    (['a-lan', 'wan', 'b-lan'], 1060.0)
    >>> print(route(load("two-sites"), "a1", "a2", size="1MiB"))  # 20us + 2**20 B / 10 Gbit/s
    a1 -> a2 over a-lan 859us
    total 859us for 1MiB
    """
    from coc.topology.units import parse_size

    _check_host(G, src)
    _check_host(G, dst)
    nbytes = parse_size(size)
    if src == dst:
        return Route((), 0.0, nbytes, src)
    model = _Model(G, nbytes)
    arrival = model.arrive(model.search(model.host_networks[src]), model.host_networks[dst])
    if arrival is None:
        raise TopologyError(f"host {src!r} cannot reach host {dst!r}",
                            file=G.graph.get("file"), name=src)
    time, last, _, costs, found = arrival
    path, pred = [], found[1]
    node: str | None = last
    while node is not None:
        path.append(node)
        node = pred[node]
    return Route(_segments(costs, src, dst, path[::-1]), time, nbytes, src)


def route_cost(G: nx.Graph, hosts: Sequence[str], size: int = 0) -> float:
    """Return the time of sending ``size`` bytes along the host path ``hosts``.

    Each step goes directly (over one network, or networks joined by links) at its
    cheapest; each host in the middle adds its forwarding cost; the message is pipelined
    over the whole path as :func:`route` says. Used to check route tables.

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("two-sites")
    >>> route_cost(G, ["a1", "a-gw", "b-gw", "b2"]) == route(G, "a1", "b2").time
    True
    """
    model = _Model(G, size)
    best: float | None = None
    for layer in model.layers:
        total = layer.tail(layer.floor)
        for i, (a, b) in enumerate(zip(hosts, hosts[1:])):
            arrival = layer.arrive(layer.search(layer.host_networks[a], forward=False),
                                   layer.host_networks[b])
            if arrival is None:
                break
            total += arrival[0] + (layer.forward_cost[a] if i else 0.0)
        else:
            best = total if best is None else min(best, total)
    if best is None:
        raise TopologyError(f"no direct steps join the hosts {' > '.join(hosts)}")
    return best


def message_time(G: nx.Graph, src: str, dst: str, size: int | str = 0,
                 eager_limit: int = EAGER_LIMIT) -> float:
    """Return the predicted seconds for one message from ``src`` to ``dst``, protocol included.

    A message up to ``eager_limit`` is sent at once: its route's time. A larger one goes by
    rendezvous: its envelope (RTS) travels to the receiver and the clear-to-send (CTS) back,
    both on the small-message route, before the bytes take the route for ``size``.

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("two-sites")
    >>> round(message_time(G, "a1", "b1", "1MiB") / route(G, "a1", "b1", "1MiB").time, 3)
    1.215
    """
    from coc.topology.units import parse_size

    nbytes = parse_size(size)
    time = route(G, src, dst, nbytes).time
    if nbytes > eager_limit:
        time += route(G, src, dst).time + route(G, dst, src).time
    return time
