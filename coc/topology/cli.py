"""The ``coc topo`` command: check, show, route and draw topology files."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterable, Sequence

import networkx as nx

from coc.errors import TopologyError
from coc.topology.hostlist import compress, natural_key
from coc.topology.levels import LEVELS, levels
from coc.topology.model import hosts, load, networks, placement_slots, sites
from coc.topology.routing import FRAGMENT, route
from coc.topology.tables import LARGE_MESSAGE, gateway_sets
from coc.topology.units import format_bandwidth, format_size, format_time, parse_size

__all__ = ["register"]

_MOST_PAIRS = 30  # gateway sets `show` prints before it summarises


def _load(source: str) -> tuple[nx.Graph, list[str]]:
    """Load ``source`` and return ``(G, warnings)`` with the warnings caught, not printed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        G = load(source)
    return G, [str(w.message) for w in caught]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary(G: nx.Graph) -> str:
    slots = sum(placement_slots(G).values())
    return (f"{G.graph['name']}: {_count(len(sites(G)), 'site')}, "
            f"{_count(len(hosts(G)), 'host')} ({_count(slots, 'slot')} for ranks), "
            f"{_count(len(networks(G)), 'network')}, "
            f"{_count(len(hosts(G, role='gateway')), 'gateway')}")


def _check(args: argparse.Namespace) -> int:
    failed = False
    for source in args.files:
        try:
            G, found = _load(source)
        except TopologyError as exc:
            where = source if exc.file is None else exc.file
            where += "" if exc.line is None else f":{exc.line}"
            print(f"{where}: error: {exc.message}", file=sys.stderr)
            failed = True
            continue
        print(f"{source}: OK: {_summary(G)}")
        for message in found:
            print(f"  warning: {message}")
    return 1 if failed else 0


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Format rows of strings as left-aligned columns."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return "\n".join(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def _host_rows(G: nx.Graph, site: str) -> list[list[str]]:
    groups: dict[tuple[str, int, tuple[str, ...]], list[str]] = {}
    for h in hosts(G, site=site):
        d = G.nodes[h]
        role = d["role"] + (" (dedicated)" if d["dedicated"] else "")
        key = (role, d["slots"], tuple(sorted(G[h], key=natural_key)))
        groups.setdefault(key, []).append(h)
    return [[compress(members), role, _count(slots, "slot"), ", ".join(nets)]
            for (role, slots, nets), members in groups.items()]


def _gateway_text(entries: Iterable[tuple[str, float]]) -> str:
    return ", ".join(f"{g} {w:.0%}" for g, w in entries) or "direct"


def _show(args: argparse.Namespace) -> int:
    G, found = _load(args.file)
    print(_summary(G))
    if G.graph.get("file"):
        print(f"file: {G.graph['file']}")
    if G.graph.get("description"):
        print(" ".join(str(G.graph["description"]).split()))
    print("\nsites:")
    for site in sites(G):
        extra = {k: v for k, v in (G.graph.get("sites", {}).get(site) or {}).items() if v}
        print(f"  {site}" + "".join(f"  {k}: {v}" for k, v in extra.items()))
        print(_table(_host_rows(G, site), indent="    "))
    print("\nnetworks:")
    rows = []
    for net in networks(G):
        d = G.nodes[net]
        n_hosts = sum(1 for h in G[net] if G.nodes[h]["kind"] == "host")
        rows.append([net, d["technology"], format_time(d["latency"]),
                     format_bandwidth(d["bandwidth"]), d["scope"], d["subnet"] or "-",
                     f"site {d['site']}" if d["site"] else "shared" if n_hosts else "-",
                     _count(n_hosts, "host")])
    print(_table(rows))
    links = [(u, v, d) for u, v, d in G.edges(data=True) if d["kind"] == "link"]
    if links:
        print("\nlinks:")
        print(_table([[f"{u} -- {v}", format_time(d["latency"]), format_bandwidth(d["bandwidth"])]
                      for u, v, d in links]))
    gateway_hosts = hosts(G, role="gateway")
    print("\ngateways: " + (compress(gateway_hosts) if gateway_hosts else "none"))
    if len(sites(G)) > 1:
        print(f"\ngateway sets (first hops; small messages / {format_size(LARGE_MESSAGE)}):")
        small, large = gateway_sets(G, 0), gateway_sets(G, LARGE_MESSAGE)
        pairs = list(small)
        print(_table([[f"{a} -> {b}", _gateway_text(small[a, b]), "/",
                       _gateway_text(large[a, b])] for a, b in pairs[:_MOST_PAIRS]]))
        if len(pairs) > _MOST_PAIRS:
            print(f"  ... and {len(pairs) - _MOST_PAIRS} more pairs of sites")
    colors = levels(G)
    print("\nlevels: " + ", ".join(
        f"{level} {len({c[level] for c in colors.values()})}" for level in LEVELS) + " colors")
    for message in found:
        print(f"warning: {message}")
    return 0


def _route(args: argparse.Namespace) -> int:
    G, _ = _load(args.file)
    size = parse_size(args.size)
    r = route(G, args.src, args.dst, size)
    print(f"route {args.src} -> {args.dst} for {format_size(size)} ({size} bytes):")
    if r.hops:
        print(_table([[hop.host, "->", hop.next_host, "over", "+".join(hop.networks),
                       format_time(hop.time, 3)] for hop in r.hops]))
    print(f"  total {format_time(r.time, 3)}" + (f" through {', '.join(r.gateways)}"
                                                 if r.gateways else " (direct)"))
    if r.gateways and size > FRAGMENT:
        print(f"  (hop times are each hop alone; gateways forward cut-through in "
              f"{format_size(FRAGMENT)} fragments, so the hops overlap)")
    return 0


def _draw(args: argparse.Namespace) -> int:
    G, _ = _load(args.file)
    r = None
    if args.route:
        r = route(G, args.route[0], args.route[1], parse_size(args.size))
    out = args.output or f"{G.graph['name']}.png"
    try:
        from coc.topology.draw import draw
    except ImportError as exc:
        print(f"coc topo draw: error: {exc}", file=sys.stderr)
        return 1
    try:
        draw(G, route=r, path=out)
    except ImportError as exc:  # matplotlib is an optional dependency
        print(f"coc topo draw: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``coc topo`` and its sub-commands to the ``coc`` argument parser."""
    topo = subparsers.add_parser("topo", help="check, show, route and draw topology files",
                                 description=__doc__)
    sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate files; exit 1 if any has an error")
    check.add_argument("files", nargs="+", metavar="FILE",
                       help="topology file or library name (e.g. two-sites)")
    check.set_defaults(func=_check)
    show = sub.add_parser("show", help="print sites, hosts, networks, gateway sets, levels")
    show.add_argument("file", metavar="FILE")
    show.set_defaults(func=_show)
    rt = sub.add_parser("route", help="print the cheapest route between two hosts")
    rt.add_argument("file", metavar="FILE")
    rt.add_argument("src", metavar="SRC")
    rt.add_argument("dst", metavar="DST")
    rt.add_argument("--size", default="0", help="message size, e.g. 4MiB (default 0)")
    rt.set_defaults(func=_route)
    dr = sub.add_parser("draw", help="draw the topology to PNG or SVG (needs matplotlib)")
    dr.add_argument("file", metavar="FILE")
    dr.add_argument("-o", "--output", help="output file, .png or .svg (default NAME.png)")
    dr.add_argument("--route", nargs=2, metavar=("SRC", "DST"), help="highlight a route")
    dr.add_argument("--size", default="0", help="message size for --route (default 0)")
    dr.set_defaults(func=_draw)
