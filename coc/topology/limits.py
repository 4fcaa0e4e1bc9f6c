"""Limits on what a topology file may ask for, checked before the work they bound is done.

A topology file comes from a user, a generator or a colleague: a mistake (or a hostile file)
must give a one-line error naming file and line, never a crash, a hang or gigabytes of memory.
Each limit is far above what a real machine needs and can be raised where one could need more:
with the environment variable ``COC_TOPOLOGY_LIMITS`` (``"hosts=2000000,slots=100000"``, read
when coc starts, so it reaches ``coc topo`` and ``coc-run``) or with :func:`set_limits`.
"""

from __future__ import annotations

import os
import reprlib
from dataclasses import dataclass, fields, replace

from coc.errors import TopologyError

__all__ = ["Limits", "limits", "set_limits", "excerpt", "shorten", "exceeded"]

ENVIRONMENT = "COC_TOPOLOGY_LIMITS"


@dataclass(frozen=True)
class Limits:
    """The limits in force (see ``docs/topology.md``, "Limits")."""

    #: bytes of a topology file
    document_bytes: int = 64 << 20
    #: nesting of YAML mappings and lists (a topology needs 6)
    depth: int = 64
    #: YAML nodes that aliases (``*anchor``) may add by repeating anchored parts, in total
    alias_nodes: int = 100_000
    #: host names one host list expression (``n[1-1000]``) may stand for
    host_range: int = 1_000_000
    #: hosts in one topology
    hosts: int = 1_000_000
    #: networks in one topology
    networks: int = 1_000_000
    #: slots of one host
    slots: int = 65_536
    #: characters of any name (host, hostname, network, site, interface)
    name_length: int = 255
    #: characters of a value quoted in an error message
    excerpt: int = 80


def _from_environment(text: str) -> Limits:
    """Return the default limits with the ``name=value`` overrides of ``text`` applied."""
    values: dict[str, int] = {}
    known = {f.name for f in fields(Limits)}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name.strip() not in known or not value.strip().isdigit():
            raise TopologyError(f"{ENVIRONMENT}: bad item {item!r}: expected name=number with a "
                             f"name of: {', '.join(sorted(known))}")
        values[name.strip()] = int(value)
    return Limits(**values)


#: "limits": the Limits in force, read from the environment on first use.
_current: dict[str, Limits] = {}


def limits() -> Limits:
    """Return the :class:`Limits` in force.

    Examples
    --------
    >>> limits().depth
    64

    Raises
    ------
    TopologyError
        When ``COC_TOPOLOGY_LIMITS`` holds a bad item (on first use).
    """
    if "limits" not in _current:
        _current["limits"] = _from_environment(os.environ.get(ENVIRONMENT, ""))
    return _current["limits"]


def set_limits(**values: int) -> Limits:
    """Raise (or lower) limits for this process; return the limits that were in force.

    Examples
    --------
    >>> before = set_limits(hosts=2_000_000)
    >>> limits().hosts, before.hosts
    (2000000, 1000000)
    >>> _ = set_limits(**vars(before))
    """
    before = limits()
    _current["limits"] = replace(before, **values)
    return before


def exceeded(what: str, name: str, value: int | None = None) -> str:
    """Return the text for the limit ``name`` exceeded (by ``value`` when known), saying how
    to raise it.

    Examples
    --------
    >>> exceeded("host 'n1' has", "slots", 100000)
    "host 'n1' has 100000 slots, more than the limit slots=65536 (raise it with COC_TOPOLOGY_LIMITS=slots=N)"
    >>> exceeded("the YAML nests", "depth")
    'the YAML nests more than 64 levels (the limit depth; raise it with COC_TOPOLOGY_LIMITS=depth=N)'
    """
    unit = {"document_bytes": "bytes", "depth": "levels", "alias_nodes": "nodes",
            "host_range": "names", "hosts": "hosts", "networks": "networks",
            "slots": "slots", "name_length": "characters"}[name]
    limit = getattr(limits(), name)
    if value is None:
        return (f"{what} more than {limit} {unit} (the limit {name}; raise it with "
                f"{ENVIRONMENT}={name}=N)")
    return (f"{what} {value} {unit}, more than the limit {name}={limit} (raise it with "
            f"{ENVIRONMENT}={name}=N)")


class _Excerpt(reprlib.Repr):
    """``repr`` that stops early: it never walks more of a value than it shows."""

    def repr1(self, x: object, level: int) -> str:
        if isinstance(x, dict) and type(x) is not dict:   # Mapping from the YAML reader
            return self.repr_dict(x, level)
        if isinstance(x, list) and type(x) is not list:
            return self.repr_list(x, level)
        return super().repr1(x, level)


def excerpt(value: object) -> str:
    """Return a ``repr`` of ``value`` cut to about :attr:`Limits.excerpt` characters.

    Containers show their first items only, so a huge (or alias-expanded) value costs no
    more than its excerpt.

    Examples
    --------
    >>> excerpt("n" * 200)[:20], len(excerpt("n" * 200)) <= 80
    ("'nnnnnnnnnnnnnnnnnnn", True)
    >>> excerpt([[1, 2]] * 10**6)
    '[[1, 2], [1, 2], [1, 2], [1, 2], ...]'
    """
    size = limits().excerpt
    if isinstance(value, str) and len(value) < size // 2:   # the common case, kept cheap
        return repr(value)
    cut = _Excerpt()
    cut.maxstring = cut.maxother = cut.maxlong = size
    cut.maxlist = cut.maxtuple = cut.maxdict = cut.maxset = cut.maxfrozenset = 4
    cut.maxlevel = 3
    text = cut.repr(value)
    return text if len(text) <= size else text[:size - 3] + "..."


def shorten(text: str) -> str:
    """Return ``text`` (a message from a library, which may quote a value) cut to a few lines.

    Examples
    --------
    >>> shorten("x" * 1000)[-10:], len(shorten("x" * 1000))
    ('xxxxxxx...', 320)
    """
    size = 4 * limits().excerpt
    return text if len(text) <= size else text[:size - 3] + "..."
