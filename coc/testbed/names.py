"""Name the namespaces, bridges and veths of a testbed so that two testbeds never collide.

Every object a testbed makes lives in a network namespace whose name starts with
``coc:<testbed>:``; the testbed name cannot contain ``:``, so one testbed's prefix never
matches another's. Namespace names have no length limit. Interface names are limited to
15 characters by the kernel (IFNAMSIZ - 1); they only need to be unique inside their own
namespace, so a readable name is used when it fits and a short hash otherwise.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from coc.errors import TestbedError

__all__ = [
    "IFNAMSIZ",
    "check_name",
    "prefix",
    "infra_namespace",
    "host_namespace",
    "owned",
    "ifname",
    "bridge",
    "port",
    "link_ends",
]

IFNAMSIZ = 15  # longest interface name the kernel accepts
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_IFNAME_OK = re.compile(r"^[A-Za-z0-9._-]+$")


def check_name(name: object) -> str:
    """Return ``name`` if it can name a testbed, else raise :class:`TestbedError`.

    >>> check_name("two-sites")
    'two-sites'
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise TestbedError(f"invalid testbed name {name!r}: use 1-64 letters, digits, '.', "
                           "'_' or '-', starting with a letter or digit")
    return name


def prefix(name: str) -> str:
    """Return the prefix shared by every namespace of testbed ``name``.

    >>> prefix("two-sites")
    'coc:two-sites:'
    """
    return f"coc:{check_name(name)}:"


def infra_namespace(name: str) -> str:
    """Return the namespace that holds testbed ``name``'s bridges (its "infrastructure").

    >>> infra_namespace("t")
    'coc:t:'
    """
    return prefix(name)


def host_namespace(name: str, host: str) -> str:
    """Return the namespace of ``host`` in testbed ``name``.

    >>> host_namespace("t", "a1")
    'coc:t:a1'
    """
    return prefix(name) + host


def owned(name: str, namespaces: Iterable[str]) -> list[str]:
    """Return the namespaces among ``namespaces`` that belong to testbed ``name``.

    >>> owned("t", ["coc:t:", "coc:t:a1", "coc:tt:a1", "other"])
    ['coc:t:', 'coc:t:a1']
    """
    p = prefix(name)
    return [ns for ns in namespaces if ns.startswith(p)]


def _hashed(tag: str, *parts: str) -> str:
    digest = hashlib.sha1("\0".join(parts).encode()).hexdigest()
    return f"{tag}{digest[:IFNAMSIZ - len(tag)]}"


def _fit(readable: str, tag: str, *parts: str) -> str:
    if len(readable) <= IFNAMSIZ and _IFNAME_OK.match(readable):
        return readable
    return _hashed(tag, *parts)


def ifname(name: str, *context: str) -> str:
    """Return ``name`` if it is a valid interface name, else a 15-character hash of it.

    ``context`` (e.g. the host) makes the hash unique where ``name`` alone may repeat.

    >>> ifname("eth0")
    'eth0'
    >>> len(ifname("infiniband-port-0", "a1"))
    15
    """
    return _fit(name, "i", name, *context)


def bridge(network: str) -> str:
    """Return the bridge name of ``network`` inside the infrastructure namespace.

    >>> bridge("a-lan")
    'br-a-lan'
    """
    return _fit(f"br-{network}", "br", network)


def port(host: str, interface: str) -> str:
    """Return the bridge-side name of the veth that carries ``host``'s ``interface``.

    >>> port("a1", "eth0")
    'a1.eth0'
    >>> port("zeta-01-long-name", "eth0").startswith("p")
    True
    """
    return _fit(f"{host}.{interface}", "p", host, interface)


def link_ends(a: str, b: str) -> tuple[str, str]:
    """Return the two veth names of the link joining networks ``a`` and ``b`` (a's end first).

    >>> link_ends("sw1", "backplane")[0].startswith("lk")
    True
    """
    return _hashed("lk", a, b, "0"), _hashed("lk", a, b, "1")
