"""Port ranges: the ports a site's firewall lets coc's listening sockets use (light: ranks import it).

Real clusters open only a range of ports on their nodes (MPICH-G2 users set
``GLOBUS_TCP_PORT_RANGE`` for it). A topology gives a range per site and per network
(``port_range: 41000-41100``); ``coc-run --port-range`` overrides them. Every listening socket
coc opens on a host — rank engines, gateway daemons, the batch relay on a login node — binds
inside the host's range (:func:`coc.topology.ports.host_port_range`, the rule), and running
out of ports is an error that names the range. This module holds what ranks and relays need
(parsing, the variable, binding) without the topology package and its networkx.
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Mapping, Sequence

from coc.errors import LaunchError, TopologyError

__all__ = ["parse_port_range", "format_port_range", "environ_port_range", "listen_socket",
           "ANY_PORT", "PORT_RANGE_VARIABLE"]

#: The range that means "any free port" (the kernel picks one).
ANY_PORT = (0, 0)
#: The variable that tells a rank's engine its port range (``LOW-HIGH``; set by coc-run).
PORT_RANGE_VARIABLE = "COC_PORT_RANGE"

def _excerpt(value: object, width: int = 80) -> str:
    """Return ``repr(value)`` cut to ``width`` characters (a hostile value stays short)."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


_RANGE = re.compile(r"^\s*(\d{1,5})\s*(?:-\s*(\d{1,5})\s*)?$")


def parse_port_range(value: object) -> tuple[int, int]:
    """Return ``(low, high)`` for ``"41000-41100"``, ``[41000, 41100]`` or one port ``41000``.

    Raises
    ------
    TopologyError
        Unless ``1 <= low <= high <= 65535`` (the message says what was given).

    Examples
    --------
    >>> parse_port_range("41000-41100"), parse_port_range([5000, 5001]), parse_port_range(7)
    ((41000, 41100), (5000, 5001), (7, 7))
    >>> parse_port_range("41100-41000")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: port range '41100-41000' is empty: its low end is above its high end
    """
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        low, high = value
    elif isinstance(value, int) and not isinstance(value, bool):
        low = high = value
    elif isinstance(value, str) and (match := _RANGE.match(value)):
        low = int(match.group(1))
        high = int(match.group(2) or low)
    else:
        raise TopologyError(f"{_excerpt(value)} is not a port range: expected LOW-HIGH like "
                            "41000-41100 (or [41000, 41100])")
    if not (1 <= low <= 65535 and 1 <= high <= 65535):
        raise TopologyError(f"port range {_excerpt(value)} is outside the ports 1-65535")
    if low > high:
        raise TopologyError(f"port range {_excerpt(value)} is empty: its low end is above its "
                            "high end")
    return low, high


def format_port_range(port_range: Sequence[int] | None) -> str:
    """Return ``"41000-41100"`` for ``(41000, 41100)`` (``"any"`` for no range).

    Examples
    --------
    >>> format_port_range((41000, 41100)), format_port_range(None)
    ('41000-41100', 'any')
    """
    if not port_range or tuple(port_range) == ANY_PORT:
        return "any"
    return f"{port_range[0]}-{port_range[1]}"


def environ_port_range(environ: Mapping[str, str]) -> tuple[int, int]:
    """Return the engine's ``port_range`` from ``COC_PORT_RANGE`` in ``environ`` (``(0, 0)``: any).

    Examples
    --------
    >>> environ_port_range({"COC_PORT_RANGE": "41000-41010"}), environ_port_range({})
    ((41000, 41010), (0, 0))
    """
    text = environ.get(PORT_RANGE_VARIABLE)
    if not text:
        return ANY_PORT
    try:
        return parse_port_range(text)
    except TopologyError as exc:
        raise TopologyError(f"{PORT_RANGE_VARIABLE}: {exc.message}") from None


def listen_socket(host: str, port_range: Sequence[int] | None = None,
                  backlog: int = 128) -> socket.socket:
    """Return a listening TCP socket on ``host`` with a port inside ``port_range``.

    The same rule as the engine's listeners (``native/src/sock.c``): the first free port
    from the low end; None or ``(0, 0)`` lets the kernel pick any port.

    Raises
    ------
    LaunchError
        When every port of the range is in use or refused, naming the range.

    Examples
    --------
    >>> with listen_socket("127.0.0.1", (0, 0)) as s:
    ...     s.getsockname()[1] > 0
    True
    """
    low, high = tuple(port_range or ANY_PORT)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for port in range(low, high + 1):
            try:
                sock.bind((host, port))
                break
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
        else:
            raise LaunchError(f"no free port in the port range {low}-{high} on {host} (every "
                              "port in it is in use or refused; widen the range: topology "
                              "port_range, coc-run --port-range)")
        sock.listen(backlog)
        return sock
    except BaseException:
        sock.close()
        raise
