"""Every exception class coc raises, one root and subclasses that carry context.

One module for all of them, so a user catches coc's errors from one import and every part
raises the same classes: the topology model (:class:`TopologyError`, :class:`HostlistError`),
the testbed (:class:`TestbedError`), the launcher and its control channel
(:class:`LaunchError`, :class:`ControlError`), the engine (:class:`EngineError` and its
subclasses, which carry the engine's return ``code``) and the communicator
(:class:`CollectiveMismatchError`). The older import places (``coc.topology.hostlist``,
``coc.testbed``, ``coc.comm``) still name the same classes.
"""

from __future__ import annotations

from os import PathLike

__all__ = [
    "CocError",
    "TopologyError",
    "TopologyWarning",
    "HostlistError",
    "TestbedError",
    "LaunchError",
    "ControlError",
    "EngineError",
    "ProtocolError",
    "AuthenticationError",
    "TruncationError",
    "PeerLost",
    "PeerExited",
    "NoRouteError",
    "ClosedError",
    "CocTimeoutError",
    "EngineValueError",
    "CancelledError",
    "CollectiveMismatchError",
]


class CocError(Exception):
    """Root of every error coc raises on purpose."""


class TopologyError(CocError, ValueError):
    """A topology file or model is invalid.

    Carries where: ``file`` and ``line`` (when the problem has a place in a file) and
    ``name`` (the host, network, site or link concerned). ``str()`` puts them first, as
    ``two-sites.yaml:14: host 'a1': unknown network 'lan-x'``.
    """

    def __init__(self, message: str, *, file: str | PathLike[str] | None = None,
                 line: int | None = None, name: str | None = None) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.line = line
        self.name = name
        where = ""
        if self.file is not None:
            where = self.file if line is None else f"{self.file}:{line}"
            where += ": "
        super().__init__(where + message)


class TopologyWarning(UserWarning):
    """A topology is valid but fragile (for example a single gateway between two sites)."""


class HostlistError(TopologyError):
    """A host list expression is malformed (names the expression and the fault)."""


class TestbedError(CocError):
    """A testbed could not be built, inspected or removed (not root, a failing ``ip``, ...)."""

    __test__ = False  # not a pytest test class, despite the name


class LaunchError(CocError):
    """A job could not be started or was torn down; names site, host and rank where known."""

    def __init__(self, message: str, *, site: str | None = None, host: str | None = None,
                 rank: int | None = None) -> None:
        self.site, self.host, self.rank = site, host, rank
        where = [f"{k} {v}" for k, v in (("site", site), ("host", host), ("rank", rank))
                 if v is not None]
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class ControlError(CocError):
    """A control-channel message is malformed, too large, cut short or not the one expected.

    The control channel is the length-prefixed JSON between ``coc-run``, its agents and each
    rank's rendezvous (:mod:`coc.protocol`); the engine's wire protocol has
    :class:`ProtocolError`.
    """


class EngineError(CocError):
    """An error reported by the native engine.

    ``code`` is the engine's return code (``COC_E*`` in ``coc.h``, a negative number).
    The binding builds every one of them from its code (``coc._engine.error``); a copy the
    communicator makes to name ranks instead of endpoints keeps it.
    """

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ProtocolError(EngineError):
    """A peer sent bytes that break the engine's wire protocol."""


class AuthenticationError(EngineError):
    """A peer failed to prove the key of the endpoint id it claims (docs/security.md)."""


class TruncationError(EngineError):
    """An incoming message is larger than the receive buffer (names source, tag, sizes)."""

    def __init__(self, message: str, *, source: int | None = None, tag: int | None = None,
                 size: int | None = None, capacity: int | None = None,
                 code: int | None = None) -> None:
        self.source, self.tag, self.size, self.capacity = source, tag, size, capacity
        super().__init__(message, code=code)


class PeerLost(EngineError, ConnectionError):
    """A peer closed or died while traffic to or from it was pending (``peer``: which)."""

    def __init__(self, message: str, *, peer: int | None = None, code: int | None = None) -> None:
        super().__init__(message, code=code)
        self.peer = peer


class PeerExited(PeerLost):
    """A receive named a source that has exited (normally) without sending a matching message.

    ``peer`` is the source that exited, ``waiter`` the endpoint (or rank) that waited and
    ``tag`` the receive's tag (-1: any).
    """

    def __init__(self, message: str, *, peer: int | None = None, waiter: int | None = None,
                 tag: int | None = None, code: int | None = None) -> None:
        super().__init__(message, peer=peer, code=code)
        self.waiter, self.tag = waiter, tag


class NoRouteError(EngineError):
    """The route table has no way to the destination."""


class ClosedError(EngineError):
    """The engine or connection was closed while the operation waited."""


class CocTimeoutError(EngineError, TimeoutError):
    """A wait ran past its deadline."""


class EngineValueError(EngineError, ValueError):
    """An argument passed to the engine is out of its documented range."""


class CancelledError(EngineError):
    """The operation was cancelled."""


class CollectiveMismatchError(CocError, ValueError):
    """Ranks called different collectives, or with different roots or counts."""
