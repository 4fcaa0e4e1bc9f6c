"""Exceptions raised by coc, one root and subclasses that carry context."""

__all__ = [
    "CocError",
    "TopologyError",
    "TopologyWarning",
    "LaunchError",
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
]


class CocError(Exception):
    """Root of every error coc raises on purpose."""


class TopologyError(CocError, ValueError):
    """A topology file or model is invalid.

    Carries where: ``file`` and ``line`` (when the problem has a place in a file) and
    ``name`` (the host, network, site or link concerned). ``str()`` puts them first, as
    ``two-sites.yaml:14: host 'a1': unknown network 'lan-x'``.
    """

    def __init__(self, message, *, file=None, line=None, name=None):
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


class LaunchError(CocError):
    """A job could not be started or was torn down; names site, host and rank where known."""

    def __init__(self, message, *, site=None, host=None, rank=None):
        self.site, self.host, self.rank = site, host, rank
        where = [f"{k} {v}" for k, v in (("site", site), ("host", host), ("rank", rank))
                 if v is not None]
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class EngineError(CocError):
    """An error reported by the native engine."""


class ProtocolError(EngineError):
    """A peer sent bytes that break the wire protocol."""


class AuthenticationError(EngineError):
    """A peer failed to prove the key of the endpoint id it claims (docs/security.md)."""


class TruncationError(EngineError):
    """An incoming message is larger than the receive buffer (names source, tag, sizes)."""

    def __init__(self, message, *, source=None, tag=None, size=None, capacity=None):
        self.source, self.tag, self.size, self.capacity = source, tag, size, capacity
        super().__init__(message)


class PeerLost(EngineError, ConnectionError):
    """A peer closed or died while traffic to or from it was pending."""


class PeerExited(PeerLost):
    """A receive named a source that has exited (normally) without sending a matching message.

    ``peer`` is the source that exited, ``waiter`` the endpoint (or rank) that waited and
    ``tag`` the receive's tag (-1: any).
    """

    def __init__(self, message, *, peer=None, waiter=None, tag=None):
        super().__init__(message)
        self.peer, self.waiter, self.tag = peer, waiter, tag


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
