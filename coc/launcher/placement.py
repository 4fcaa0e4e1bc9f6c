"""Place ranks onto the slots of a topology's hosts, and gateway daemons onto gateway hosts.

Pure functions over a topology graph (see ``coc.topology``); nothing here starts anything.
Ranks are numbered site by site, and inside a site host by host (each host's slots filled
before the next host's), so neighbouring ranks share a host and a site.
"""

import heapq
import itertools
from dataclasses import dataclass

from coc.errors import LaunchError
from coc import topology
from coc.topology import hostlist

__all__ = ["Placement", "parse_host_items", "parse_hostfile", "available_slots",
           "site_counts", "place_ranks", "place_gateways"]


@dataclass(frozen=True)
class Placement:
    """Where one rank runs: its site and host, and its index among the host's ranks."""

    rank: int
    site: str
    host: str
    local_rank: int
    local_size: int


def parse_host_items(items):
    """Return ``[(host, slots or None), ...]`` from ``--host`` values.

    Each value is a host list expression with an optional ``:SLOTS`` suffix that applies to
    every host it names.

    Examples
    --------
    >>> parse_host_items(["a[1-2]:1", "b1"])
    [('a1', 1), ('a2', 1), ('b1', None)]
    """
    limits = []
    for item in items:
        expression, colon, count = item.rpartition(":")
        if not colon:
            expression, count = item, ""
        elif not count.isdigit():
            raise LaunchError(f"--host {item!r}: slots after ':' must be a number")
        slots = int(count) if count else None
        limits.extend((host, slots) for host in hostlist.expand(expression))
    return limits


def parse_hostfile(text, file="hostfile"):
    """Return ``[(host, slots or None), ...]`` from a hostfile (Open MPI or MPICH style).

    Lines are ``host``, ``host slots=N`` or ``host:N``; ``#`` starts a comment; the host may
    be a host list expression.

    Examples
    --------
    >>> parse_hostfile("a[1-2] slots=2  # rack 1\\nb1:4\\n\\nb2\\n")
    [('a1', 2), ('a2', 2), ('b1', 4), ('b2', None)]
    """
    limits = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        host, slots = words[0], None
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key not in ("slots", "max_slots", "max-slots") or not value.isdigit():
                raise LaunchError(f"{file}:{number}: expected 'host slots=N', got {line.strip()!r}")
            if key == "slots":
                slots = int(value)
        try:
            limits.extend(parse_host_items([host]) if slots is None
                          else parse_host_items([f"{host}:{slots}"]))
        except LaunchError as exc:
            raise LaunchError(f"{file}:{number}: {exc}") from None
    return limits


def available_slots(G, limits=None):
    """Return ``{site: [(host, slots), ...]}`` of the hosts ranks may use, in topology order.

    Parameters
    ----------
    G : networkx.Graph
        A topology (``coc.topology.load``).
    limits : list of (host, slots or None), optional
        Only these hosts are used (``--host``, ``--hostfile``, a scheduler allocation); a
        number replaces the host's slot count from the topology.

    Raises
    ------
    LaunchError
        For a host that is not in the topology or is a dedicated gateway.

    Examples
    --------
    >>> from coc.topology import load
    >>> available_slots(load("two-sites"), [("b2", 1), ("a1", None)])
    {'a': [('a1', 2)], 'b': [('b2', 1)]}
    """
    slots = topology.placement_slots(G)
    if limits is not None:
        chosen = {}
        for host, count in limits:
            attrs = G.nodes.get(host)
            if attrs is None or attrs.get("kind") != "host":
                known = hostlist.compress(list(slots))
                raise LaunchError(f"unknown host (topology {G.graph.get('name')} has: {known})",
                                  host=host)
            if attrs["dedicated"]:
                raise LaunchError("is a dedicated gateway and runs no ranks", host=host)
            chosen[host] = slots.get(host, 0) if count is None else count
        slots = {host: count for host, count in chosen.items() if count}
    by_site = {site: [] for site in topology.sites(G)}
    for host in sorted(slots, key=hostlist.natural_key):
        by_site[G.nodes[host]["site"]].append((host, slots[host]))
    return {site: hosts for site, hosts in by_site.items() if hosts}


def site_counts(available, n=None, requested=None, oversubscribe=False):
    """Return ``{site: number of ranks}``, in the order ranks are numbered.

    With ``requested`` (``--site a=4``, in command-line order) those counts are used;
    otherwise ``n`` ranks (default: every available slot) are dealt one at a time to the
    site with room that has the fewest so far (ties: topology order).

    Examples
    --------
    >>> site_counts({"a": [("a1", 2)], "b": [("b1", 2), ("b2", 2)]}, 5)
    {'a': 2, 'b': 3}
    >>> site_counts({"a": [("a1", 2)], "b": [("b1", 2)]}, requested=[("b", 1), ("a", 2)])
    {'b': 1, 'a': 2}
    """
    capacity = {site: sum(slots for _, slots in hosts) for site, hosts in available.items()}
    if requested:
        counts = {}
        for site, count in requested:
            if site in counts:
                raise LaunchError("given twice with --site", site=site)
            if site not in capacity:
                raise LaunchError("no hosts to run ranks on (unknown site, or its hosts were "
                                  f"left out; usable sites: {', '.join(capacity) or 'none'})",
                                  site=site)
            counts[site] = count
        if n is not None and n != sum(counts.values()):
            raise LaunchError(f"-n {n} disagrees with --site counts adding up to "
                              f"{sum(counts.values())}")
    else:
        if not capacity:
            raise LaunchError("no host may run ranks")
        counts = dict(capacity) if n is None else _deal(capacity, n)
    for site, count in counts.items():
        if count > capacity[site] and not oversubscribe:
            raise LaunchError(f"{count} ranks but only {capacity[site]} slots "
                              "(add --oversubscribe to run more ranks than slots)", site=site)
    return {site: count for site, count in counts.items() if count}


def _deal(capacity, n):
    """Deal ``n`` ranks one at a time to the site with room that has the fewest so far (ties:
    topology order); once every site is full, to the site with the fewest. O(n log sites).
    """
    counts = dict.fromkeys(capacity, 0)
    order = {site: i for i, site in enumerate(capacity)}
    heap = [(0, order[site], site) for site in capacity if capacity[site] > 0]
    full = not heap
    if full:
        heap = [(0, order[site], site) for site in capacity]
    for _ in range(n):
        count, i, site = heapq.heappop(heap)
        counts[site] = count + 1
        if full or count + 1 < capacity[site]:
            heapq.heappush(heap, (count + 1, i, site))
        if not heap:   # every site is full: deal on to all of them
            full = True
            heap = [(counts[s], order[s], s) for s in capacity]
            heapq.heapify(heap)
    return counts


def place_ranks(available, counts):
    """Return one :class:`Placement` per rank, filling each site's hosts in order.

    Past the last slot (``--oversubscribe``) the hosts are filled again from the first.

    Examples
    --------
    >>> [(p.rank, p.host, p.local_rank) for p in place_ranks(
    ...     {"a": [("a1", 2), ("a2", 2)], "b": [("b1", 1)]}, {"b": 1, "a": 3})]
    [(0, 'b1', 0), (1, 'a1', 0), (2, 'a1', 1), (3, 'a2', 0)]
    """
    hosts = []
    for site, count in counts.items():
        # A generator: only the slots used are made (a host may have thousands).
        slots = itertools.cycle(host for host, n in available[site] for _ in range(n))
        hosts.extend((site, next(slots)) for _ in range(count))
    per_host = {}
    for _, host in hosts:
        per_host[host] = per_host.get(host, 0) + 1
    seen = {}
    placements = []
    for rank, (site, host) in enumerate(hosts):
        seen[host] = seen.get(host, 0) + 1
        placements.append(Placement(rank, site, host, seen[host] - 1, per_host[host]))
    return placements


def place_gateways(G, placements, tables=None):
    """Return the gateway hosts that lie on a route between two hosts that run ranks.

    Every next hop of the route tables, of every size class, counts, so all the gateways
    that share the load between two sites, and those only large messages pass, get a daemon.

    Parameters
    ----------
    tables : coc.topology.RouteTables, optional
        ``coc.topology.route_tables(G)``, when the caller already has it.

    Returns
    -------
    list of str
        Gateway hosts in topology order; one gateway daemon runs on each.

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("two-sites")
    >>> place_gateways(G, place_ranks(available_slots(G), {"a": 1, "b": 1}))
    ['a-gw', 'b-gw']
    >>> place_gateways(G, place_ranks(available_slots(G), {"a": 4}))
    []
    """
    tables = topology.route_tables(G) if tables is None else tables
    # hosts of one class route alike: one rank host per class stands for the others
    ends = list({tables.host_class[p.host]: p.host for p in placements}.values())
    gateways = set()
    for (src, dst), size in itertools.product(itertools.permutations(ends, 2),
                                              tables.size_classes):
        frontier, seen = [src], set()
        while frontier:
            for hop, _ in tables.next_hops(frontier.pop(), dst, size):
                if hop != dst and hop not in seen:
                    seen.add(hop)
                    frontier.append(hop)
        gateways |= seen
    return sorted(gateways, key=hostlist.natural_key)
