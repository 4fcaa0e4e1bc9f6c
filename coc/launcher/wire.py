"""``coc-run --encrypt`` and ``--compress``: a job's own marking of the topology's networks.

A network's ``encrypt`` and ``compress`` (docs/topology.md, "Encryption and compression")
decide which hops get the record layer. These options override them for one job, the way
``--delay`` overrides a latency and ``--port-range`` a site's ports:

- ``--encrypt on|off`` and ``--compress zstd|lz4|none`` set every network *between sites*
  (the WAN hops the keys are meant for; networks inside one site keep their marking);
- ``--encrypt NETWORK=on|off`` and ``--compress NETWORK=CODEC`` set one network (any,
  also one inside a site: the job then warns, as ``coc topology validate`` would);
- a named network wins over the unnamed value, whatever their order; of two values for the
  same network the last wins.

The overrides change a copy of the topology (:func:`override`), so everything downstream
(:meth:`coc.launcher.plan.Plan.wire`, ``--dry-run``) sees the marking the job uses.
"""

import copy

from coc.errors import LaunchError
from coc.topology.model import COMPRESSORS

__all__ = ["parse_markings", "override", "describe"]

_SWITCH = {"on": True, "off": False, "true": True, "false": False}


def _scoped(item, option, choices):
    """Split ``[NETWORK=]VALUE`` into (network or None, value), checking the value."""
    network, equals, value = item.rpartition("=")
    if equals and not network:
        raise LaunchError(f"{option} {item}: expected [NETWORK=]VALUE, the network name is "
                          f"empty")
    if value.lower() not in choices:
        raise LaunchError(f"{option} {item}: {value!r} is not one of "
                          f"{'|'.join(dict.fromkeys(choices))}")
    return (network if equals else None), value.lower()


def parse_markings(encrypt=(), compress=()):
    """Return ``{network or None: {"encrypt": bool, "compress": name}}`` (only the keys
    given) from ``--encrypt`` and ``--compress`` values; ``None`` stands for every network
    between sites.

    Examples
    --------
    >>> parse_markings(["on", "lan-a=off"], ["wan=lz4"])
    {None: {'encrypt': True}, 'lan-a': {'encrypt': False}, 'wan': {'compress': 'lz4'}}
    """
    markings = {}
    for item in encrypt:
        network, value = _scoped(item, "--encrypt", _SWITCH)
        markings.setdefault(network, {})["encrypt"] = _SWITCH[value]
    for item in compress:
        network, value = _scoped(item, "--compress", COMPRESSORS)
        markings.setdefault(network, {})["compress"] = value
    return markings


def override(G, markings):
    """Return (topology, warnings): a copy of ``G`` with ``markings`` applied, and a warning
    for each network inside one site that a named override marks.

    A network the topology does not have is an error naming the topology file and the
    networks it has.
    """
    networks = sorted(n for n, d in G.nodes(data=True) if d.get("kind") == "network")
    unknown = sorted(set(markings) - set(networks) - {None})
    if unknown:
        where = G.graph.get("file") or G.graph.get("name") or "the topology"
        raise LaunchError(f"--encrypt/--compress: unknown network "
                          f"{', '.join(map(repr, unknown))} ({where} has: "
                          f"{', '.join(networks)})")
    if not markings:
        return G, []
    G = copy.deepcopy(G)
    every = markings.get(None, {})
    warnings = []
    for net in networks:
        attrs = G.nodes[net]
        given = markings.get(net, {})
        attrs.update(every if attrs.get("site") is None else {}, **given)
        if given and attrs.get("site") is not None and (
                attrs.get("encrypt") or attrs.get("compress", "none") != "none"):
            warnings.append(f"--encrypt/--compress mark network {net!r}, which is inside "
                            f"site {attrs['site']!r}: its traffic never leaves the site, and "
                            f"the layer costs CPU on every message there")
    return G, warnings


def describe(G):
    """Return one line per network that is marked, for ``--dry-run`` (none: no lines)."""
    lines = []
    for net in sorted(n for n, d in G.nodes(data=True) if d.get("kind") == "network"):
        d = G.nodes[net]
        parts = (["encrypted"] if d.get("encrypt") else []) + (
            [f"compressed ({d['compress']})"] if d.get("compress", "none") != "none" else [])
        if parts:
            lines.append(f"  {net}: {', '.join(parts)}")
    return lines
