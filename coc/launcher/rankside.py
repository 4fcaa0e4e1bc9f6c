"""The rank's half of the rendezvous: credentials first, then addresses for peers and routes.

``coc-run``'s site agent gives every rank one end of a socket pair, inherited as the file
descriptor named by ``COC_CONTROL_FD``, and writes a *welcome* on it at once: the rank's
endpoint id and the job's secret, which the engine needs to open. ``coc.init()`` then calls
:func:`credentials` (open the engine with them) and :func:`rendezvous` with the engine's
address; that blocks until every rank and gateway daemon of the job has sent its address,
and returns the peers and the route table. The secret never appears in the environment or
on a command line.
"""

import os
import socket

from coc.errors import LaunchError, ProtocolError
from coc.launcher import protocol

__all__ = ["CONTROL_FD", "credentials", "rendezvous"]

#: Environment variable naming the inherited rendezvous socket.
CONTROL_FD = "COC_CONTROL_FD"

_state = {"socket": None, "welcome": None}


def _receive_exactly(sock, size):
    """Return exactly ``size`` bytes from ``sock``; raise if the agent hung up first."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ProtocolError("coc-run's agent closed the rendezvous socket")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock, expected):
    """Return the next message from the agent, checking its type."""
    try:
        message = protocol.decode(_receive_exactly(
            sock, protocol.decode_length(_receive_exactly(sock, 4))))
    except (ProtocolError, OSError) as exc:
        raise LaunchError(f"the job was torn down before the rendezvous completed ({exc})")
    if message["type"] != expected:
        raise ProtocolError(f"expected a {expected} message, got {message['type']!r}")
    return message


def _socket(environ):
    """Return the inherited rendezvous socket, opening it on first use."""
    if _state["socket"] is None:
        environ = os.environ if environ is None else environ
        if CONTROL_FD not in environ:
            raise LaunchError(f"{CONTROL_FD} is not set: start this program with coc-run")
        try:
            _state["socket"] = socket.socket(fileno=int(environ[CONTROL_FD]))
        except (ValueError, OSError) as exc:
            raise LaunchError(f"{CONTROL_FD}={environ[CONTROL_FD]!r} is not an open socket: "
                              f"{exc}") from None
    return _state["socket"]


def credentials(environ=None):
    """Return what opening the engine needs: this endpoint's id and the job's secret.

    Parameters
    ----------
    environ : mapping, optional
        Where to find ``COC_CONTROL_FD`` (default ``os.environ``).

    Returns
    -------
    dict
        ``rank``, ``size``, ``self_id`` (the engine's endpoint id), ``job_id`` and
        ``secret`` (bytes).

    Raises
    ------
    LaunchError
        When the process was not started by ``coc-run`` or the job was torn down.
    """
    if _state["welcome"] is None:
        welcome = _receive(_socket(environ), "welcome")
        _state["welcome"] = {"rank": welcome["rank"], "size": welcome["size"],
                             "self_id": welcome["self_id"], "job_id": welcome["job_id"],
                             "secret": bytes.fromhex(welcome["secret"])}
    return dict(_state["welcome"])


def rendezvous(address, environ=None):
    """Exchange this rank's engine address for its peers' addresses and its route table.

    Call once, after opening the engine with :func:`credentials`.

    Parameters
    ----------
    address : str
        The engine's contact addresses (``coc_engine_address()``).
    environ : mapping, optional
        Where to find ``COC_CONTROL_FD`` (default ``os.environ``).

    Returns
    -------
    dict
        What :func:`credentials` returns, plus ``peers`` ({endpoint id: address} of every
        other rank and gateway daemon), ``routes`` ({destination endpoint id: [(next hop
        endpoint id, weight), ...]}; a hop equal to the destination means "directly") and
        ``placement`` ([(site, host)] of every rank, indexed by rank).

    Raises
    ------
    LaunchError
        When the process was not started by ``coc-run`` or the job was torn down meanwhile.
    """
    info = credentials(environ)
    sock = _state["socket"]
    try:
        sock.sendall(protocol.encode({"type": "address", "address": address}))
    except OSError as exc:
        raise LaunchError(f"the job was torn down before the rendezvous completed ({exc})")
    answer = _receive(sock, "rendezvous")
    sock.close()
    _state["socket"] = None
    info["peers"] = {int(k): v for k, v in answer["peers"].items()}
    info["routes"] = {int(k): [tuple(hop) for hop in hops]
                      for k, hops in answer["routes"].items()}
    info["placement"] = [tuple(where) for where in answer["placement"]]
    return info
