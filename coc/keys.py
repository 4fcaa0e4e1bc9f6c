"""Endpoint keys: what a rank holds instead of the job's secret (docs/security.md).

Every connection of a job proves the key its two endpoints share, K(a, b), derived from the
job's secret and both endpoints' ids and kinds (:func:`coc._engine.pair_key`). Trusted
processes — ``coc-run``, the site agents, gateway daemons — hold the secret and derive keys
as they need them. A rank receives, through its launcher's control channel, only
K(itself, peer) for each peer it exchanges frames with directly (the next hops of its
routes, and the endpoints whose routes have it as a next hop): so it can prove no endpoint
id but its own, cannot pass for a gateway, and cannot derive any other pair's key.

:func:`issue` makes a rank's table as JSON for the control channel; :func:`table` reads it
back into what :class:`coc._engine.Engine` takes as ``keys``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from coc._native import engine as _engine

__all__ = ["issue", "table"]


def issue(secret: bytes, endpoint: int, peers: Iterable[int],
          gateways: Collection[int] = ()) -> dict[str, dict[str, Any]]:
    """Return the key table of ``endpoint`` as JSON: ``{"peer id": {"key": hex, "gateway": bool}}``.

    Parameters
    ----------
    secret : bytes
        The job's secret.
    endpoint : int
        The endpoint (a rank) the table is for; it is not a gateway.
    peers : iterable of int
        The endpoints it may talk to directly.
    gateways : collection of int
        Which of them are gateway daemons (their kind is part of the key).

    Examples
    --------
    >>> t = issue(bytes(32), 0, [1, 5], gateways={5})
    >>> sorted(t), t["5"]["gateway"], len(bytes.fromhex(t["1"]["key"]))
    (['1', '5'], True, 32)
    """
    return {str(peer): {"key": _engine.pair_key(secret, endpoint, peer,
                                                b_gateway=peer in gateways).hex(),
                        "gateway": peer in gateways}
            for peer in sorted(set(peers) - {endpoint})}


def table(doc: object, where: str) -> dict[int, tuple[bytes, bool]]:
    """Return ``doc`` (as :func:`issue` made it) as ``{peer id: (key bytes, is_gateway)}``.

    Raises ValueError naming ``where`` (e.g. "the welcome of rank 3") when it is malformed.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: 'keys' must be an object of endpoint id -> key")
    out: dict[int, tuple[bytes, bool]] = {}
    for peer, entry in doc.items():
        try:
            key = bytes.fromhex(entry["key"])
            out[int(peer)] = (key, bool(entry["gateway"]))
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"{where}: the key for endpoint {peer!r} must be "
                             '{"key": HEX, "gateway": BOOL}') from None
        if len(key) != _engine.KEY_LEN:
            raise ValueError(f"{where}: the key for endpoint {peer} has {len(key)} bytes, "
                             f"not {_engine.KEY_LEN}")
    return out
