"""Route table documents: the form the plan hands out, checked, and applied to an engine.

A route table maps each destination endpoint id to its next hops with weights. The plan
hands it to ranks (the rendezvous answer's ``routes``) and to gateway daemons (their
config's ``routes``) as JSON, in one of two forms per destination:

- ``[[hop, weight], ...]`` — one route for every message size;
- ``{"small": [[hop, weight], ...], "large": [[hop, weight], ...]}`` — the engine's two
  size classes apart: ``small`` carries eager messages and every envelope (one hop per
  pair, so messages stay in order), ``large`` the bytes of rendezvous messages (striped
  over all of its hops by weight). See docs/engine.md "Routes by size class".

:func:`parse_routes` turns either into ``{dest: {"small": [(hop, weight), ...], "large":
[...]}}``; :func:`apply_routes` sets that on an engine; :func:`next_hops` lists the hops.
Beside routes, the plan hands out emulated latencies (``delays``: ``{peer: seconds}``,
``coc.launcher.latency``), checked by :func:`delay_table` and set by :func:`apply_delays`,
and the record layer of the hops whose network the topology marks (``wire``: ``{peer:
{"encrypt": bool, "compress": "zstd"|"lz4"|"none"}}``, docs/topology.md "Encryption and
compression"), checked by :func:`wire_table` and set by :func:`apply_wire`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from coc._native import engine as _native

__all__ = ["SIZE_CLASSES", "parse_routes", "apply_routes", "next_hops", "delay_table",
           "apply_delays", "wire_table", "apply_wire", "Hops", "Routes", "Wire"]

SIZE_CLASSES = ("small", "large")

#: Next hops of one destination and size class: ``[(hop endpoint, weight), ...]``.
Hops = list[tuple[int, int]]
#: A parsed route table: ``{destination endpoint: {"small": hops, "large": hops}}``.
Routes = dict[int, dict[str, Hops]]


class Wire(TypedDict):
    """The record layer of the connections to one peer (docs/topology.md)."""

    encrypt: bool
    compress: str


def _pairs(hops: Any, what: str) -> Hops:
    """Return ``hops`` (``[[hop, weight], ...]``) as a non-empty list of int pairs."""
    try:
        pairs = [(int(hop), int(weight)) for hop, weight in hops]
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a list of [hop, weight] pairs, not {hops!r}") from None
    if not pairs:
        raise ValueError(f"{what} has no hops")
    if any(weight < 0 for _, weight in pairs) or not any(weight for _, weight in pairs):
        raise ValueError(f"{what} needs weights >= 0, not all zero, got {hops!r}")
    return pairs


# The docstring's sections (numpydoc) are those of every public function documented so, as
# coc.topology.route's: alike on purpose.
def parse_routes(routes: object, where: str = "route table") -> Routes:
    """Check a route table document and return it with both size classes spelled out.

    Parameters
    ----------
    routes : dict
        ``{dest: [[hop, weight], ...]}`` or ``{dest: {"small": [...], "large": [...]}}``
        per destination (keys may be JSON strings).
    where : str
        What the table is, for error messages (e.g. ``"gateway config"``).

    Returns
    -------
    dict
        ``{dest: {"small": [(hop, weight), ...], "large": [(hop, weight), ...]}}``.

    Raises
    ------
    ValueError
        Naming the destination and what is wrong with its entry.

    Examples
    --------
    >>> parse_routes({"5": [[10, 3], [11, 1]]})
    {5: {'small': [(10, 3), (11, 1)], 'large': [(10, 3), (11, 1)]}}
    >>> parse_routes({5: {"small": [[5, 1]], "large": [[10, 2], [11, 1]]}})[5]["large"]
    [(10, 2), (11, 1)]
    """
    if not isinstance(routes, dict):
        raise ValueError(f"{where}: 'routes' must be an object of endpoint id -> hops, "
                         f"not {type(routes).__name__}")
    parsed: Routes = {}
    for key, hops in routes.items():
        try:
            dest = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: route key {key!r} is not an endpoint id") from None
        what = f"{where}: route to {dest}"
        if isinstance(hops, dict):
            if set(hops) != set(SIZE_CLASSES):
                raise ValueError(f"{what} must name exactly the size classes "
                                 f"{list(SIZE_CLASSES)}, got {sorted(hops)}")
            parsed[dest] = {cls: _pairs(hops[cls], f"{what} ({cls} messages)")
                            for cls in SIZE_CLASSES}
        else:
            pairs = _pairs(hops, what)
            parsed[dest] = {cls: list(pairs) for cls in SIZE_CLASSES}
    return parsed


def apply_routes(eng: _native.Engine, routes: Routes) -> None:
    """Set the parsed ``routes`` on engine ``eng`` (one call per destination when the
    classes agree, else one per class)."""
    for dest, classes in routes.items():
        small, large = classes["small"], classes["large"]
        if small == large:
            eng.set_route(dest, [h for h, _ in small], [w for _, w in small])
            continue
        for cls in SIZE_CLASSES:
            eng.set_route(dest, [h for h, _ in classes[cls]], [w for _, w in classes[cls]],
                          size_class=cls)


def next_hops(routes: Routes) -> list[int]:
    """Return the sorted next hops of the parsed ``routes`` that are not the destination
    itself (the gateways this endpoint sends through), over both size classes."""
    return sorted({hop for dest, classes in routes.items() for cls in SIZE_CLASSES
                   for hop, _ in classes[cls] if hop != dest})


def delay_table(doc: object, where: str) -> dict[int, float]:
    """Check a ``delays`` document ``{peer endpoint: seconds}`` (keys may be JSON strings).

    Examples
    --------
    >>> delay_table({"7": 0.01}, "gateway config")
    {7: 0.01}
    """
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: 'delays' must map endpoint ids to seconds, not {doc!r}")
    table: dict[int, float] = {}
    for key, value in doc.items():
        try:
            peer, seconds = int(key), float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: delay to {key!r} must be seconds, not "
                             f"{value!r}") from None
        if seconds < 0:
            raise ValueError(f"{where}: delay to {peer} is negative ({seconds})")
        table[peer] = seconds
    return table


def apply_delays(eng: _native.Engine, delays: dict[int, float]) -> None:
    """Hold every frame ``eng`` sends to each peer of ``delays`` for its seconds."""
    for peer, seconds in delays.items():
        eng.set_peer_delay(peer, seconds)


def wire_table(doc: object, where: str) -> dict[int, Wire]:
    """Check a ``wire`` document ``{peer endpoint: {"encrypt": bool, "compress": name}}``.

    Examples
    --------
    >>> wire_table({"7": {"encrypt": True, "compress": "zstd"}}, "gateway config")
    {7: {'encrypt': True, 'compress': 'zstd'}}
    """
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: 'wire' must map endpoint ids to record layers, not {doc!r}")
    table: dict[int, Wire] = {}
    if doc:   # the topology package (networkx) only where a hop is marked
        from coc.topology.model import COMPRESSORS
    for key, entry in doc.items():
        try:
            peer = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: wire key {key!r} is not an endpoint id") from None
        if not isinstance(entry, dict) or set(entry) - {"encrypt", "compress"}:
            raise ValueError(f"{where}: wire to {peer} must be {{'encrypt': bool, 'compress': "
                             f"name}}, not {entry!r}")
        encrypt, compress = entry.get("encrypt", False), entry.get("compress", "none")
        if not isinstance(encrypt, bool) or compress not in COMPRESSORS:
            raise ValueError(f"{where}: wire to {peer}: encrypt must be true or false and "
                             f"compress one of {', '.join(COMPRESSORS)}, got {entry!r}")
        table[peer] = {"encrypt": encrypt, "compress": compress}
    return table


def apply_wire(eng: _native.Engine, wire: dict[int, Wire]) -> None:
    """Give the connections ``eng`` makes to each peer of ``wire`` its record layer (before
    any of them is dialed)."""
    for peer, entry in wire.items():
        eng.set_peer_wire(peer, **entry)
