"""Draw a topology: sites grouped and colored, gateways marked, networks shown, routes highlighted.

matplotlib is optional (``pip install 'coc[draw]'``); it is imported only when something is drawn.
"""

from __future__ import annotations

import io
import itertools
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from os import PathLike
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any, Optional, Union, cast

import networkx as nx

from coc.errors import TopologyError

from coc.topology.hostlist import compress
from coc.topology.routing import Route
from coc.topology.units import format_bandwidth, format_time

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["draw", "to_svg", "layout", "display_graph", "COLLAPSE_ABOVE"]

#: A site with more hosts than this is drawn with its compute hosts merged into groups.
COLLAPSE_ABOVE = 12

_INCH_PER_UNIT = 0.62
_ROUTE_COLOR = "#d62728"
_SHARED_COLOR = "#7f7f7f"
_SITE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                "#17becf", "#bcbd22")

#: What to highlight: a Route, or the host names it passes.
RouteLike = Union[Route, Sequence[str]]
_Vector = tuple[float, float]
_Positions = dict[str, _Vector]
#: A site's rows: (inward vector, row direction, rows, gap between rows, spacing, width).
_SitePlan = tuple[_Vector, _Vector, tuple[list[str], list[str], list[str]], float, list[float],
                  float]
#: What a drawing shows: route hosts, route edges, the display graph and its positions.
_Scene = tuple[list[str], set[frozenset[str]], nx.Graph, _Positions]


def _matplotlib() -> ModuleType:
    """Import matplotlib on first use, with the install hint when it is missing."""
    try:
        import matplotlib
        import matplotlib.collections
        import matplotlib.figure
        import matplotlib.lines
    except ImportError as exc:
        raise ImportError("drawing a topology needs matplotlib: pip install 'coc[draw]'") from exc
    return matplotlib


def _sites(G: nx.Graph) -> list[str]:
    """Return the site names in the order their first host appears in ``G``."""
    return list(dict.fromkeys(a["site"] for _, a in G.nodes(data=True) if a["kind"] == "host"))


def _networks_of(G: nx.Graph, host: str) -> frozenset[str]:
    return frozenset(n for n in G[host] if G.nodes[n]["kind"] == "network")


def display_graph(G: nx.Graph, keep: Iterable[str] = (),
                  collapse_above: int = COLLAPSE_ABOVE) -> nx.Graph:
    """Return the graph to draw, with the compute hosts of large sites merged into groups.

    In a site with more than ``collapse_above`` hosts, compute hosts attached to exactly the same
    networks become one node labelled with their compressed hostlist and count, e.g.
    ``a[01-24] x24``; gateways, front-ends and the hosts in ``keep`` stay single.

    Parameters
    ----------
    G : networkx.Graph
        A topology (host and network nodes, interface and link edges).
    keep : iterable of str
        Hosts never merged (for instance the hosts of a highlighted route).
    collapse_above : int
        Sites with at most this many hosts are drawn host by host.

    Returns
    -------
    networkx.Graph
        Host, group and network nodes with their attributes, plus ``home`` (the site a node is
        drawn with: a host's site; for a network, the one site whose non-gateway hosts use it,
        or None when it is shared) and, on host nodes, ``members`` (the hosts it stands for).

    Examples
    --------
    >>> from coc.topology import load
    >>> D = display_graph(load("bunyip"))
    >>> sorted(n for n, a in D.nodes(data=True) if a["kind"] == "host")
    ['a[01-24] x24', 'b[01-24] x24', 'c[01-24] x24', 'd[01-24] x24']
    >>> sorted(D["a[01-24] x24"])
    ['sw-ab', 'sw-ac', 'sw-ad']
    """
    kept = set(keep)
    D: nx.Graph = nx.Graph(**G.graph)
    merged: dict[str, str] = {}
    for site in _sites(G):
        hosts = [h for h, a in G.nodes(data=True) if a["kind"] == "host" and a["site"] == site]
        groups: defaultdict[frozenset[str], list[str]] = defaultdict(list)
        for h in hosts:
            attrs = G.nodes[h]
            if len(hosts) > collapse_above and attrs["role"] == "compute" and h not in kept:
                groups[_networks_of(G, h)].append(h)
            else:
                D.add_node(h, **attrs, members=[h], home=site)
        for members in groups.values():
            if len(members) == 1:
                D.add_node(members[0], **G.nodes[members[0]], members=members, home=site)
                continue
            name = f"{compress(members)} x{len(members)}"
            D.add_node(name, kind="host", site=site, role="compute", dedicated=False,
                       slots=sum(G.nodes[h]["slots"] for h in members), members=members,
                       home=site)
            merged.update(dict.fromkeys(members, name))
    D.add_nodes_from((n, {**a, "home": a["site"] or _home(G, n)})
                     for n, a in G.nodes(data=True) if a["kind"] == "network")
    for u, v, attrs in G.edges(data=True):
        D.add_edge(merged.get(u, u), merged.get(v, v), **attrs)
    return D


def _home(G: nx.Graph, network: str) -> str | None:
    """Return the one site whose non-gateway hosts use ``network`` (a LAN its gateways share)."""
    users = {G.nodes[h]["site"] for h in G[network]
             if G.nodes[h]["kind"] == "host" and G.nodes[h]["role"] != "gateway"}
    return users.pop() if len(users) == 1 else None


def _rows(D: nx.Graph, site: str) -> tuple[list[str], list[str], list[str]]:
    """Return the outer (hosts), middle (site networks) and inner (gateways) rows of a site."""
    hosts: list[str] = []
    nets: list[str] = []
    gateways: list[str] = []
    for n, a in D.nodes(data=True):
        if a["home"] != site:
            continue
        if a["kind"] == "network":
            nets.append(n)
        elif a["role"] == "gateway":
            gateways.append(n)
        else:
            hosts.append(n)
    return hosts, nets, gateways


def _label(D: nx.Graph, n: str) -> str:
    """Return the text written under node ``n``."""
    a = D.nodes[n]
    if a["kind"] == "network":
        scope = " (public)" if a.get("scope") == "public" else ""
        return f"{n}{scope}\n{a['technology']} {format_bandwidth(a['bandwidth'])}"
    return n + ("\n(dedicated)" if a.get("dedicated") else "")


def _extent(D: nx.Graph, n: str) -> _Vector:
    """Return the (width, height) in layout units that node ``n`` and its label need."""
    lines = _label(D, n).split("\n")
    return 0.1 * max(map(len, lines)) + 0.5, 0.3 * len(lines) + 1.0


def _need(D: nx.Graph, n: str, axis: _Vector) -> float:
    """Return how much room node ``n`` needs along the unit vector ``axis``."""
    w, h = _extent(D, n)
    return abs(axis[0]) * w + abs(axis[1]) * h


def _axes(angle: float, alone: bool) -> tuple[_Vector, _Vector]:
    """Return a site's inward unit vector and its row direction (in reading order)."""
    u = (0.0, -1.0) if alone else (-math.cos(angle), -math.sin(angle))
    t = (-u[1], u[0])
    if t[0] < -1e-9 or (abs(t[0]) <= 1e-9 and t[1] > 0):
        t = (-t[0], -t[1])
    return u, t


def layout(D: nx.Graph) -> dict[str, tuple[float, float]]:
    """Return deterministic positions: sites on a circle, each as rows of hosts, networks, gateways.

    Each site faces the centre: its hosts on the outside, its own networks in the middle, its
    gateways on the inside; networks shared by several sites (a WAN, a common switch) sit between
    the sites that use them. Rows are spaced by the size of their labels, and the same graph
    always gets the same picture.

    Parameters
    ----------
    D : networkx.Graph
        A topology or the result of :func:`display_graph`.

    Returns
    -------
    dict
        Node name to ``(x, y)``.

    Examples
    --------
    >>> from coc.topology import load
    >>> pos = layout(display_graph(load("two-sites")))
    >>> pos["a1"][0] < pos["a-lan"][0] < pos["a-gw"][0] < pos["wan"][0] < pos["b-gw"][0]
    True
    """
    sites = _sites(D)
    angles = {s: math.pi + 2 * math.pi * k / len(sites) for k, s in enumerate(sites)}
    plan: dict[str, _SitePlan] = {}
    for s in sites:
        u, t = _axes(angles[s], len(sites) == 1)
        rows = _rows(D, s)
        gap = max([1.6] + [_need(D, n, u) + 0.3 for row in rows for n in row])
        spacing = [max([0.0] + [_need(D, n, t) + 0.2 for n in row]) for row in rows]
        width = max(len(row) * sp for row, sp in zip(rows, spacing))
        plan[s] = (u, t, rows, gap, spacing, width)
    radius = 0.0
    if len(sites) > 1:
        widest = max(p[5] for p in plan.values())
        shared = any(a["kind"] == "network" and a["home"] is None for _, a in D.nodes(data=True))
        radius = max(widest / (2 * math.sin(math.pi / len(sites))) + 1.0,
                     max((2 * p[3] if shared else p[3]) + 1.5 for p in plan.values()))
    pos: _Positions = {}
    for s in sites:
        (ux, uy), (tx, ty), rows, gap, spacing, _ = plan[s]
        cx, cy = radius * math.cos(angles[s]), radius * math.sin(angles[s])
        for depth, row, sp in zip((-gap, 0.0, gap), rows, spacing):
            for i, n in enumerate(row):
                along = (i - (len(row) - 1) / 2) * sp
                pos[n] = (cx + depth * ux + along * tx, cy + depth * uy + along * ty)
    _place_shared(D, pos, plan if len(sites) == 1 else None)
    return pos


def _overlaps(D: nx.Graph, pos: _Positions, n: str, xy: _Vector) -> bool:
    """Tell whether node ``n`` at ``xy`` would cover a node already placed (label boxes)."""
    w, h = _extent(D, n)
    for m, (x, y) in pos.items():
        mw, mh = _extent(D, m)
        if abs(x - xy[0]) < (w + mw) / 2 and abs(y - xy[1]) < (h + mh) / 2:
            return True
    return False


def _place_shared(D: nx.Graph, pos: _Positions, alone: dict[str, _SitePlan] | None) -> None:
    """Put each network no single site owns between the sites (and networks) it joins.

    ``alone`` is the one site's plan when there is a single site: its shared networks (a
    backplane) go one row further in, beyond its gateways.
    """
    shared = [n for n, a in D.nodes(data=True) if a["kind"] == "network" and n not in pos]
    for n in shared:
        by_site: defaultdict[Optional[str], list[_Vector]] = defaultdict(list)
        for m in D[n]:
            if m in pos:
                by_site[D.nodes[m]["home"]].append(pos[m])
        means = [tuple(sum(c) / len(ps) for c in zip(*ps)) for ps in by_site.values()]
        x, y = tuple(sum(c) / len(means) for c in zip(*means)) if means else (0.0, 0.0)
        if alone:
            (ux, uy), _, _, gap, _, _ = next(iter(alone.values()))
            x, y = x + 2 * gap * ux, y + 2 * gap * uy
        step, y0 = 0, y
        while _overlaps(D, pos, n, (x, y)):
            step += 1
            y = y0 + 0.8 * ((step + 1) // 2) * (-1) ** step
        pos[n] = (x, y)


def _route_path(G: nx.Graph, route: RouteLike) -> tuple[list[str], set[frozenset[str]]]:
    """Return the hosts of ``route`` and the edges of ``G`` it travels (host-network-...-host)."""
    if isinstance(route, Route):  # each hop names the networks it crosses
        return [h for h in route.hosts if h is not None], {
            frozenset(e) for h in route.hops
            for e in itertools.pairwise([h.host, *(h.networks or [h.network]), h.next_host])}
    hosts = list(route)
    for h in hosts:
        if h not in G or G.nodes[h]["kind"] != "host":
            raise TopologyError(f"route names {h!r}, which is not a host of this topology", name=h)
    nets = [n for n, a in G.nodes(data=True) if a["kind"] == "network"]

    def latency(x: str, y: str, attrs: dict[str, Any]) -> float:
        # a hop over the fastest network when the route names only hosts
        return attrs.get("latency", 0.0) + sum(G.nodes[z].get("latency", 0.0) for z in (x, y)) / 2

    edges: set[frozenset[str]] = set()
    for u, v in itertools.pairwise(hosts):
        try:
            path = nx.shortest_path(G.subgraph([*nets, u, v]), u, v, weight=latency)
        except nx.NetworkXNoPath:
            raise TopologyError(f"route hop {u} -> {v}: no network joins them", name=u) from None
        edges.update(frozenset(e) for e in itertools.pairwise(path))
    return hosts, edges


def _site_color(D: nx.Graph) -> dict[str, str]:
    return {s: _SITE_COLORS[i % len(_SITE_COLORS)] for i, s in enumerate(_sites(D))}


def _scene(G: nx.Graph, route: RouteLike | None) -> _Scene:
    """Return what a drawing shows: route hosts and edges, the display graph, its positions."""
    route_hosts: list[str] = []
    route_edges: set[frozenset[str]] = set()
    if route is not None:
        route_hosts, route_edges = _route_path(G, route)
    D = display_graph(G, keep=route_hosts)
    return route_hosts, route_edges, D, layout(D)


def _render(ax: Axes, G: nx.Graph, route: RouteLike | None, scene: _Scene) -> None:
    """Draw the ``scene`` of ``G`` (and ``route``) on the matplotlib axes ``ax``."""
    mpl = _matplotlib()
    route_hosts, route_edges, D, pos = scene
    color = _site_color(D)

    def node_color(n: str) -> str:
        return color.get(D.nodes[n]["home"], _SHARED_COLOR)

    segments: defaultdict[tuple[str, str | None], list[tuple[_Vector, _Vector]]] = \
        defaultdict(list)
    for u, v, a in D.edges(data=True):
        on_route = frozenset((u, v)) in route_edges
        style = ("route" if on_route else a["kind"], None if on_route or a["kind"] == "link"
                 else node_color(u if D.nodes[u]["kind"] == "host" else v))
        segments[style].append((pos[u], pos[v]))
    widths = {"interface": 1.0, "link": 5.0, "route": 3.5}
    for (kind, col), segs in sorted(segments.items(), key=lambda kv: kv[0][0] == "route"):
        ax.add_collection(mpl.collections.LineCollection(
            segs, linewidths=widths[kind], zorder=5.5 if kind == "route" else 1,
            colors=_ROUTE_COLOR if kind == "route" else (col or "#555555"),
            alpha={"interface": 0.45, "link": 1.0, "route": 0.85}[kind], capstyle="round"))

    for u, v, a in D.edges(data=True):
        (x1, y1), (x2, y2) = pos[u], pos[v]
        if a["kind"] == "link" and math.dist((x1, y1), (x2, y2)) > 3.0:  # else labels collide
            ax.annotate(format_bandwidth(a["bandwidth"]), ((x1 + x2) / 2, (y1 + y2) / 2),
                        ha="center", va="center", fontsize=6.5, color="#333333", zorder=5,
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.9))
    for n, a in D.nodes(data=True):
        x, y = pos[n]
        if a["kind"] == "network":
            ax.scatter([x], [y], marker="s", s=420, c="white", edgecolors=node_color(n),
                       linewidths=2.2, zorder=6)
            ax.annotate(_label(D, n), (x, y), xytext=(0, -15), textcoords="offset points",
                        ha="center", va="top", fontsize=7, zorder=5,
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
            continue
        count = len(a["members"])
        marker = {"gateway": "D", "frontend": "^"}.get(a["role"], "o")
        size = 260 if count == 1 else min(420 + 6 * count, 900)
        edge = "black" if a["role"] == "gateway" else "white"
        ax.scatter([x], [y], marker=marker, s=size, c=node_color(n), edgecolors=edge,
                   linewidths=2.0 if a["role"] == "gateway" else 1.0, zorder=6)
        if n in route_hosts:
            ax.scatter([x], [y], marker="o", s=size * 2.2, facecolors="none",
                       edgecolors=_ROUTE_COLOR, linewidths=2.5, zorder=6)
        ax.annotate(_label(D, n), (x, y), xytext=(0, -math.sqrt(size) / 2 - 4),
                    textcoords="offset points", ha="center",
                    va="top", fontsize=7.5, zorder=5,
                    fontweight="bold" if a["role"] == "gateway" else "normal")
    _label_sites(ax, D, pos, color)
    _legend(ax, mpl, D, color, route is not None)
    _title(ax, G, route, route_hosts)
    xs, ys = zip(*pos.values())
    ax.set_xlim(min(xs) - 2, max(xs) + 2)
    ax.set_ylim(min(ys) - 2.2, max(ys) + 1.8)
    ax.set_aspect("equal")
    ax.set_axis_off()


def _label_sites(ax: Axes, D: nx.Graph, pos: _Positions, color: dict[str, str]) -> None:
    """Write each site's name and slot count above its nodes (underneath for a bottom site)."""
    for site in _sites(D):
        members = [n for n, a in D.nodes(data=True) if a["home"] == site]
        xs, ys = zip(*(pos[n] for n in members))
        slots = sum(D.nodes[n]["slots"] for n in members
                    if D.nodes[n]["kind"] == "host" and not D.nodes[n].get("dedicated"))
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        below = my < 0 and abs(my) > abs(mx)  # a site under the centre is labelled underneath
        ax.text(mx, min(ys) - 1.4 if below else max(ys) + 0.9, f"site {site}  ({slots} slots)",
                ha="center", va="top" if below else "bottom", fontsize=10, fontweight="bold",
                color=color[site], zorder=5)


def _legend(ax: Axes, mpl: ModuleType, D: nx.Graph, color: dict[str, str],
            with_route: bool) -> None:
    """Add a legend with the sites and only the kinds of node and edge that are drawn."""
    Line2D = mpl.lines.Line2D
    handles = [Line2D([], [], ls="", marker="o", ms=8, mfc=c, mec="white", label=f"site {s}")
               for s, c in color.items()]
    roles = {a.get("role") for _, a in D.nodes(data=True)}
    if "gateway" in roles:
        handles.append(Line2D([], [], ls="", marker="D", ms=7, mfc="#cccccc", mec="black",
                              mew=2, label="gateway"))
    if "frontend" in roles:
        handles.append(Line2D([], [], ls="", marker="^", ms=8, mfc="#cccccc", mec="white",
                              label="front-end"))
    handles.append(Line2D([], [], ls="", marker="s", ms=9, mfc="white", mec="#555555", mew=2,
                          label="network"))
    if any(a["kind"] == "link" for _, _, a in D.edges(data=True)):
        handles.append(Line2D([], [], color="#555555", lw=4, label="link"))
    if with_route:
        handles.append(Line2D([], [], color=_ROUTE_COLOR, lw=3, label="route"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)


def _title(ax: Axes, G: nx.Graph, route: RouteLike | None, route_hosts: list[str]) -> None:
    title = G.graph.get("name") or "topology"
    if route_hosts:
        title += "\nroute " + " \u2192 ".join(route_hosts)
        if isinstance(route, Route):
            title += f"  ({format_time(route.time, 3)})"
    ax.set_title(title, fontsize=11)


def _figsize(scene: _Scene) -> _Vector:
    """Return a figure size (inches) that keeps the scene's labels legible."""
    xs, ys = zip(*scene[3].values())
    width = min(max((max(xs) - min(xs) + 4) * _INCH_PER_UNIT + 1.6, 5.0), 20.0)
    height = min(max((max(ys) - min(ys) + 4) * _INCH_PER_UNIT, 3.5), 16.0)
    return width, height


def _save(fig: Figure, target: str | PathLike[str] | IO[Any],
          fmt: str | None) -> None:
    """Save ``fig``; SVG keeps text as text and has no date and fixed ids, so it is searchable."""
    mpl = _matplotlib()
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "coc"}):
        fig.savefig(target, format=fmt, dpi=150, bbox_inches="tight",
                    metadata={"Date": None} if fmt == "svg" else None)


def draw(G: nx.Graph, route: RouteLike | None = None, ax: Axes | None = None,
         path: str | PathLike[str] | None = None) -> Axes:
    """Draw a topology so its sites, gateways, networks and a route can be seen at a glance.

    Hosts are colored by site, gateways are diamonds with a black edge, networks are squares
    labelled with technology and bandwidth, interfaces are thin lines and links thick ones.
    Sites with more than :data:`COLLAPSE_ABOVE` hosts show their compute hosts merged into
    groups (``node[01-24] x24``). The layout is deterministic.

    Parameters
    ----------
    G : networkx.Graph
        A topology, e.g. from :func:`coc.topology.load`.
    route : Route or list of str, optional
        Highlight this route: a ``Route`` from :func:`coc.topology.route` or host names.
    ax : matplotlib.axes.Axes, optional
        Draw here; by default a new pyplot figure (so it shows in Jupyter), or a standalone
        figure when ``path`` is given.
    path : str or os.PathLike, optional
        Also write the drawing to this file; the format follows the suffix (.png, .svg, .pdf).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> from coc.topology import load, route
    >>> G = load("chemnitz-2003")
    >>> r = route(G, "athlon1", "xeon3", "4MiB")
    >>> ax = draw(G, route=r, path="chemnitz.png")  # doctest: +SKIP
    """
    mpl = _matplotlib()
    scene = _scene(G, route)
    if ax is None:
        if path is None:
            import matplotlib.pyplot as plt

            fig = plt.figure(figsize=_figsize(scene))
        else:
            fig = mpl.figure.Figure(figsize=_figsize(scene))
        ax = fig.add_subplot()
    _render(ax, G, route, scene)
    if path is not None:
        # an axes of a subfigure (which cannot be saved alone) fails here as it always has
        _save(cast("Figure", ax.figure), path, os.path.splitext(os.fspath(path))[1][1:].lower() or None)
    return ax


def to_svg(G: nx.Graph, route: RouteLike | None = None) -> str:
    """Return the drawing of ``G`` (``route`` highlighted) as SVG text, for notebooks and files.

    Parameters
    ----------
    G : networkx.Graph
        A topology.
    route : Route or list of str, optional
        A route to highlight, as for :func:`draw`.

    Returns
    -------
    str
        A complete SVG document; names are real ``<text>`` elements, so they can be searched.

    Examples
    --------
    >>> from coc.topology import load
    >>> svg = to_svg(load("two-sites"), route=["a1", "a-gw", "b-gw", "b1"])
    >>> svg.startswith("<?xml"), ">site b  (8 slots)</text>" in svg
    (True, True)
    """
    mpl = _matplotlib()
    scene = _scene(G, route)
    fig = mpl.figure.Figure(figsize=_figsize(scene))
    _render(fig.add_subplot(), G, route, scene)
    out = io.StringIO()
    _save(fig, out, "svg")
    return out.getvalue()
