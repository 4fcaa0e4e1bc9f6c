"""The rank's half of the rendezvous: send the engine address, receive secret, peers, routes.

``coc-run``'s site agent gives every rank one end of a socket pair, inherited as the file
descriptor named by ``COC_CONTROL_FD``. ``coc.init()`` calls :func:`rendezvous` once, after
opening its engine, and blocks until every rank of the job has done the same.
"""

import os
import socket

from coc.errors import LaunchError, ProtocolError
from coc.launcher import protocol

__all__ = ["CONTROL_FD", "rendezvous"]

#: Environment variable naming the inherited rendezvous socket.
CONTROL_FD = "COC_CONTROL_FD"


def _receive_exactly(sock, size):
    """Return exactly ``size`` bytes from ``sock``; raise if the agent hung up first."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ProtocolError("coc-run's agent closed the rendezvous socket mid-answer")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def rendezvous(address, *, environ=None):
    """Exchange this rank's engine address for the job's secret, peers and route table.

    Parameters
    ----------
    address : str
        The engine's contact addresses (``coc_engine_address()``).
    environ : mapping, optional
        Where to find ``COC_CONTROL_FD`` (default ``os.environ``).

    Returns
    -------
    dict
        ``rank``, ``size``, ``self_id`` (this rank's endpoint id), ``job_id``, ``secret``
        (bytes), ``peers`` ({endpoint id: address}) and ``routes`` ({destination endpoint id:
        [(next hop endpoint id, weight), ...]}).

    Raises
    ------
    LaunchError
        When the process was not started by ``coc-run`` or the job was torn down meanwhile.
    """
    environ = os.environ if environ is None else environ
    if CONTROL_FD not in environ:
        raise LaunchError(f"{CONTROL_FD} is not set: start this program with coc-run")
    try:
        sock = socket.socket(fileno=int(environ[CONTROL_FD]))
    except (ValueError, OSError) as exc:
        raise LaunchError(f"{CONTROL_FD}={environ[CONTROL_FD]!r} is not an open socket: {exc}")
    with sock:
        try:
            sock.sendall(protocol.encode({"type": "address", "address": address}))
            header = _receive_exactly(sock, 4)
        except (ProtocolError, OSError):
            raise LaunchError("the job was torn down before the rendezvous completed") from None
        answer = protocol.decode(_receive_exactly(sock, protocol.decode_length(header)))
    if answer["type"] != "rendezvous":
        raise ProtocolError(f"expected a rendezvous answer, got {answer['type']!r}")
    return {
        "rank": answer["rank"],
        "size": answer["size"],
        "self_id": answer["self_id"],
        "job_id": answer["job_id"],
        "secret": bytes.fromhex(answer["secret"]),
        "peers": {int(k): v for k, v in answer["peers"].items()},
        "routes": {int(k): [tuple(hop) for hop in hops] for k, hops in answer["routes"].items()},
    }
