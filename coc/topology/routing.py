"""Routes between hosts under coc's cost model: the cheapest path for a message size."""

import heapq
import itertools
from dataclasses import dataclass, field

from coc.errors import TopologyError
from coc.topology.hostlist import natural_key
from coc.topology.units import format_size, format_time

__all__ = ["Hop", "Route", "route", "route_cost", "DIRECT", "TIE"]

DIRECT = None  # the "first hop" of a path that passes no gateway: straight to the destination
TIE = 1e-12  # relative difference below which two path costs count as equal


@dataclass(frozen=True)
class Hop:
    """One hop of a route: ``host`` sends to ``next_host`` over ``network``.

    ``networks`` lists every network crossed when networks joined by links are used
    (``network`` is the first of them); ``time`` is the hop's estimated seconds, including
    the forwarding cost of ``host`` when it is a gateway in the middle of the route.
    """

    host: str
    network: str
    next_host: str
    time: float
    networks: tuple = ()


@dataclass(frozen=True)
class Route:
    """The cheapest route for a message of ``size`` bytes; ``time`` is its estimate in seconds."""

    hops: tuple
    time: float
    size: int = 0
    src: str = field(default=None, compare=False)

    @property
    def hosts(self):
        """The hosts of the route: source, gateways in order, destination."""
        if not self.hops:
            return (self.src, self.src)
        return (self.hops[0].host,) + tuple(hop.next_host for hop in self.hops)

    @property
    def gateways(self):
        """The gateways that forward the message, in order."""
        return self.hosts[1:-1]

    def __str__(self):
        lines = [f"{hop.host} -> {hop.next_host} over {'+'.join(hop.networks)} "
                 f"{format_time(hop.time, 3)}" for hop in self.hops]
        lines.append(f"total {format_time(self.time, 3)} for {format_size(self.size)}")
        return "\n".join(lines)


class _Costs:
    """The topology reduced to networks and gateways, with every cost for one message size."""

    def __init__(self, G, size):
        self.size = size
        self.cost, self.bandwidth, self.links, self.gateways = {}, {}, {}, {}
        for net, d in G.nodes(data=True):
            if d["kind"] == "network":
                self.cost[net] = d["latency"] + size / d["bandwidth"]
                self.bandwidth[net] = d["bandwidth"]
                self.links[net], self.gateways[net] = [], []
        self.host_networks, self.forward_cost = {}, {}
        for h, d in G.nodes(data=True):
            if d["kind"] == "host":
                self.host_networks[h] = list(G[h])
                if d["role"] == "gateway":
                    self.forward_cost[h] = d["forward_cost"]
                    for net in G[h]:
                        self.gateways[net].append(h)
        for u, v, d in G.edges(data=True):
            if d["kind"] == "link":
                cost = d["latency"] + size / d["bandwidth"]
                self.links[u].append((v, cost, d["bandwidth"]))
                self.links[v].append((u, cost, d["bandwidth"]))

    def search(self, start, tolerance=TIE, forward=True):
        """Run Dijkstra from the networks ``start`` (the source host's networks).

        Returns ``(dist, pred, first)``: the cost of reaching each network (after crossing
        it) or gateway (after forwarding), its predecessor on one cheapest path, and its
        *first hops* ``{gateway or DIRECT: bottleneck bandwidth}`` over all paths within
        ``tolerance`` of the cheapest. Gateways whose networks are all in ``start`` are
        never used: the source reaches their networks directly; with ``forward=False``
        no gateway is used (what the source reaches directly).
        """
        start = frozenset(start)
        dist, pred, first, done = {}, {}, {}, set()
        heap, counter = [], itertools.count()

        def relax(node, d, parent, hops):
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
                        relax(other, d + cost + self.cost[other], node,
                              {hop: min(b, limit) for hop, b in hops.items()})
                for g in self.gateways[node] if forward else ():
                    if g in done or g in unused:
                        continue
                    entered = {}
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
    def arrive(found, networks, tolerance=TIE):
        """Return ``(cost, best network, first hops)`` for a host on ``networks``, or None."""
        dist, _, first = found
        reached = [(dist[net], net) for net in networks if net in dist]
        if not reached:
            return None
        best, net = min(reached)
        hops = {}
        for d, other in reached:
            if d <= best * (1 + tolerance):
                for hop, b in first[other].items():
                    hops[hop] = max(hops.get(hop, 0.0), b)
        return best, net, hops


def _check_host(G, host):
    if host not in G or G.nodes[host].get("kind") != "host":
        raise TopologyError(f"unknown host {host!r}", file=G.graph.get("file"), name=host)


def _segments(costs, src, dst, path):
    """Cut a node path (networks and gateways) into hops between hosts."""
    hops, host, nets = [], src, []

    def close(next_host):
        time = sum(costs.cost[net] for net in nets)
        time += sum(next(c for other, c, _ in costs.links[a] if other == b)
                    for a, b in zip(nets, nets[1:]))
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


def route(G, src, dst, size=0):
    """Return the cheapest route from host ``src`` to host ``dst`` for ``size`` bytes.

    The cost of a route is the sum, over every network and link it crosses, of
    ``latency + size / bandwidth``, plus the ``forward_cost`` of every gateway it passes.
    Only hosts with role gateway forward, so they are the only hosts inside a route.
    Small messages therefore favour low latency and large ones high bandwidth.

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
    size = parse_size(size)
    if src == dst:
        return Route((), 0.0, size, src)
    costs = _Costs(G, size)
    found = costs.search(costs.host_networks[src])
    arrival = costs.arrive(found, costs.host_networks[dst])
    if arrival is None:
        raise TopologyError(f"host {src!r} cannot reach host {dst!r}",
                            file=G.graph.get("file"), name=src)
    time, node, _ = arrival
    path, pred = [], found[1]
    while node is not None:
        path.append(node)
        node = pred[node]
    return Route(_segments(costs, src, dst, path[::-1]), time, size, src)


def route_cost(G, hosts, size=0):
    """Return the cost of sending ``size`` bytes along the host path ``hosts``.

    Each step goes directly (over one network, or networks joined by links) at its
    cheapest; each host in the middle adds its forwarding cost. Used to check route tables.

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("two-sites")
    >>> route_cost(G, ["a1", "a-gw", "b-gw", "b2"]) == route(G, "a1", "b2").time
    True
    """
    costs = _Costs(G, size)
    total = 0.0
    for i, (a, b) in enumerate(zip(hosts, hosts[1:])):
        arrival = costs.arrive(costs.search(costs.host_networks[a], forward=False),
                               costs.host_networks[b])
        if arrival is None:
            raise TopologyError(f"host {a!r} cannot send directly to host {b!r}")
        total += arrival[0] + (costs.forward_cost[a] if i else 0.0)
    return total
