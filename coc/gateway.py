"""Run a gateway daemon: an engine that only forwards, driven over stdin/stdout.

``python -m coc.gateway`` reads its configuration as the first :mod:`coc.protocol` message
on stdin (so the job's secret never appears on a command line), opens an
:class:`coc._engine.Engine` with forwarding on, answers with its address, and then forwards
in the engine's progress thread — the data path never enters Python — until stdin reaches
EOF or SIGTERM/SIGINT arrives. Later messages update peers and routes or ask for the stats.
The driver's side (the messages, and :class:`~coc.gatewayclient.GatewayProcess`) is
:mod:`coc.gatewayclient`; the protocol is described in ``docs/engine.md``.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FrameType
from typing import Any, TypedDict, Union

from coc import protocol
from coc._native import engine as _engine
from coc.errors import CocError
from coc.gatewayclient import GatewayProcess  # noqa: F401 (callers of coc.gateway find it here)
from coc.routes import (Routes, Wire, apply_delays, apply_routes, apply_wire, delay_table,
                        parse_routes, wire_table)

__all__ = ["GatewayProcess", "parse_config", "apply_update", "serve", "main"]

log = logging.getLogger("coc.gateway")

_OPTIONS = {"eager_limit": 0, "fragment_size": 0, "forward_window": 0,
            "handshake_timeout_ms": 0, "spin_ns": 0, "log_interval": 1.0}


class _StopSignals:
    """Turn SIGTERM/SIGINT into a readable pipe that the daemon's waits select on.

    The handler only records the signal and writes one byte: raising from a handler could
    land inside any statement (a log call swallowed such an exception once, and the daemon
    never stopped). A second signal takes the default action, so a stuck shutdown still ends.
    """

    def __init__(self) -> None:
        self.fd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)
        self.signum: int | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            os.write(self._wfd, b"s")
        except BlockingIOError:  # a byte is already waiting
            pass

    @property
    def name(self) -> str | None:
        """The received signal's name (``"SIGTERM"``), or None."""
        return None if self.signum is None else signal.Signals(self.signum).name


class GatewayConfig(TypedDict):
    """What :func:`parse_config` makes of a gateway's configuration message."""

    engine: dict[str, Any]           # keyword arguments of coc._engine.Engine
    peers: dict[int, str]            # endpoint id -> address
    routes: Routes
    delays: dict[int, float]
    wire: dict[int, Wire]
    connect: list[int]
    log_interval: float


def _int_keys(mapping: object, what: str) -> dict[int, Any]:
    """Return ``mapping`` with its keys (endpoint ids as JSON strings) turned into ints."""
    if not isinstance(mapping, dict):
        raise ValueError(f"gateway config: '{what}' must be an object of endpoint id -> ..., "
                         f"not {type(mapping).__name__}")
    try:
        return {int(k): v for k, v in mapping.items()}
    except ValueError as exc:
        raise ValueError(f"gateway config: '{what}' has a key that is not an endpoint id: "
                         f"{exc}") from None


def parse_config(doc: object) -> GatewayConfig:
    """Check the first JSON document and return keyword arguments for the gateway.

    Parameters
    ----------
    doc : dict
        ``self_id`` (int), ``secret`` (hex string), and optionally ``listen_host``
        (default ``"127.0.0.1"``), ``port_range`` ([min, max]), ``peers``
        ({id: address}), ``routes`` ({dest: [[hop, weight], ...]} or, per size class,
        {dest: {"small": [...], "large": [...]}}; see :mod:`coc.routes`), ``connect`` (next
        hops to connect to at once, so their loss is noticed), ``delays`` ({id: seconds}
        of emulated latency toward next hops, :mod:`coc.routes`), ``wire`` ({id:
        {"encrypt": bool, "compress": name}}: the record layer of marked hops,
        :mod:`coc.routes`) and ``options``
        (``eager_limit``, ``fragment_size``, ``forward_window``, ``handshake_timeout_ms``,
        ``spin_ns``, ``log_interval``).

    Returns
    -------
    dict
        ``engine`` (keyword arguments of :class:`coc._engine.Engine`), ``peers``,
        ``routes``, ``delays``, ``wire``, ``connect`` and ``log_interval``.

    Examples
    --------
    >>> cfg = parse_config({"self_id": 9, "secret": "00" * 16, "routes": {"1": [[1, 1]]}})
    >>> cfg["engine"]["self_id"], cfg["routes"]
    (9, {1: {'small': [(1, 1)], 'large': [(1, 1)]}})
    """
    if not isinstance(doc, dict):
        raise ValueError("gateway config must be a JSON object")
    unknown = set(doc) - {"self_id", "secret", "listen_host", "port_range", "peers", "routes",
                          "delays", "connect", "options", "wire"}
    if unknown:
        raise ValueError(f"gateway config: unknown keys {sorted(unknown)}")
    for key in ("self_id", "secret"):
        if key not in doc:
            raise ValueError(f"gateway config: '{key}' is missing")
    try:
        secret = bytes.fromhex(doc["secret"])
    except (TypeError, ValueError):
        raise ValueError("gateway config: 'secret' must be a hex string") from None
    options = dict(_OPTIONS)
    extra = set(doc.get("options", {})) - set(_OPTIONS)
    if extra:
        raise ValueError(f"gateway config: unknown options {sorted(extra)}")
    options.update(doc.get("options", {}))
    log_interval = float(options.pop("log_interval"))
    port_range = tuple(int(p) for p in doc.get("port_range", (0, 0)))
    if len(port_range) != 2:
        raise ValueError("gateway config: 'port_range' must be [min, max]")
    engine = dict(self_id=int(doc["self_id"]), secret=secret,
                  listen_host=doc.get("listen_host", "127.0.0.1"), port_range=port_range,
                  forward=True, **{k: int(v) for k, v in options.items()})
    return {"engine": engine,
            "peers": {k: str(v) for k, v in _int_keys(doc.get("peers", {}), "peers").items()},
            "routes": parse_routes(doc.get("routes", {}), "gateway config"),
            "delays": delay_table(doc.get("delays", {}), "gateway config"),
            "wire": wire_table(doc.get("wire", {}), "gateway config"),
            "connect": _parse_connect(doc),
            "log_interval": log_interval}


def apply_update(eng: _engine.Engine, peers: Mapping[int, str], routes: Routes,
                 connect: Iterable[int] = ()) -> None:
    """Give the engine its peers' addresses, then its routes; connect to ``connect`` now."""
    for pid, address in peers.items():
        eng.add_peer(pid, address)
    apply_routes(eng, routes)
    for hop in connect:
        eng.connect(hop)


#: Seconds a dialed link has to be up (connected and authenticated) before it counts as blocked.
DIAL_TIMEOUT = 10.0


def dial(eng: _engine.Engine, hops: Sequence[int], peers: Mapping[int, str],
         timeout: float = DIAL_TIMEOUT) -> None:
    """Connect to each next hop of ``hops`` now and wait until every link is up.

    For a site that accepts no inbound connections (``outbound_only``): its gateway makes
    the link, and the peer sends back on it. The wait is bounded by ``timeout`` seconds.

    Raises
    ------
    ConnectionError
        Naming the endpoint, its address and what the engine saw (refused, no answer).
    """
    deadline = time.monotonic() + timeout
    where = {hop: next((a for a in peers.get(hop, "").split() if a.startswith("tcp://")),
                       peers.get(hop) or "(address unknown)") for hop in hops}
    for hop in hops:
        eng.connect(hop)
    waiting = list(hops)
    while waiting:
        for line in eng.take_log():
            log.warning("%s", line)
            failed = next((hop for hop in waiting if line.startswith(f"endpoint {hop} ")
                           and "failed" in line), None)
            if failed is not None:
                raise ConnectionError(f"cannot connect to endpoint {failed} at "
                                      f"{where[failed]}: {line}")
        waiting = [hop for hop in waiting if not eng.connected(hop)]
        if waiting and time.monotonic() >= deadline:
            raise ConnectionError(f"cannot connect to endpoint {waiting[0]} at "
                                  f"{where[waiting[0]]}: no answer within {timeout:g} s")
        if waiting:
            time.sleep(0.005)


def _parse_connect(doc: Mapping[str, Any]) -> list[int]:
    """Return the ``connect`` list of a config or update: next hops to connect to now."""
    hops = doc.get("connect", [])
    if not isinstance(hops, list) or not all(isinstance(h, int) for h in hops):
        raise ValueError("gateway config: 'connect' must be a list of endpoint ids")
    return hops


def _reply(message: dict[str, Any]) -> None:
    """Send one message to the driver on stdout."""
    protocol.write_message(1, message)


def _move_log(eng: _engine.Engine) -> None:
    for line in eng.take_log():
        log.warning("%s", line)


_UPDATE_KEYS = {"type", "peers", "routes", "connect", "dial", "dial_timeout"}


def _handle(eng: _engine.Engine, message: dict[str, Any]) -> None:
    """Act on one request after the configuration and answer it.

    ``update`` is applied and answered with ``ok`` and the current stats (with ``dial``:
    once every link is up); ``status`` is answered with the stats (coc-run's watchdog asks
    it). A bad request is answered with ``error``; the daemon goes on.
    """
    try:
        if message["type"] == "status":
            _reply({"type": "status", "stats": eng.stats()})
            return
        if message["type"] != "update":
            raise ValueError(f"unknown request {message['type']!r} (expected update or status)")
        unknown = set(message) - _UPDATE_KEYS
        if unknown:
            raise ValueError(f"an update has 'peers', 'routes', 'connect' and/or 'dial', not "
                             f"{sorted(unknown)}")
        peers = {k: str(v) for k, v in _int_keys(message.get("peers", {}), "peers").items()}
        apply_update(eng, peers, parse_routes(message.get("routes", {}), "gateway update"),
                     _parse_connect(message))
        dial(eng, _parse_connect({"connect": message.get("dial", [])}), peers,
             float(message.get("dial_timeout", DIAL_TIMEOUT)))
    except (ValueError, TypeError, OSError, CocError) as exc:
        log.error("bad request: %s", exc)
        _reply({"type": "error", "message": str(exc)})
        return
    _reply({"type": "ok", "stats": eng.stats()})


#: What :func:`_next` returns once the stop descriptor is readable.
STOP = "stop"


def _waiting(reader: protocol.MessageReader, stop_fd: int | None) -> selectors.PollSelector:
    """Return a poll(2) selector on ``reader`` and ``stop_fd`` (if given), for :func:`_next`."""
    sel = selectors.PollSelector()
    sel.register(reader.fileno(), selectors.EVENT_READ)
    if stop_fd is not None:
        sel.register(stop_fd, selectors.EVENT_READ)
    return sel


def _next(reader: protocol.MessageReader, sel: selectors.BaseSelector, stop_fd: int | None,
          interval: float | None = None, idle: Callable[[], None] | None = None
          ) -> Union[dict[str, Any], str, None]:
    """Return the driver's next message, None at EOF, or :data:`STOP` on a stop signal.

    ``sel`` comes from :func:`_waiting`. ``idle()`` (if given) runs at least every
    ``interval`` seconds while the daemon waits.
    """
    while (message := reader.next()) is None:
        if reader.eof:
            return None
        ready = sel.select(interval)
        if idle is not None:
            idle()
        if any(key.fd == stop_fd for key, _ in ready):
            return STOP
        if ready:
            reader.fill()
    return message


def serve(eng: _engine.Engine, reader: protocol.MessageReader, log_interval: float,
          stop_fd: int | None = None) -> str:
    """Answer requests from ``reader`` (a :class:`coc.protocol.MessageReader`) until EOF;
    move engine log lines to ``logging`` meanwhile.

    Returns ``"eof"``, or ``"stop"`` once ``stop_fd`` (if given) becomes readable.
    """
    with _waiting(reader, stop_fd) as sel:
        while True:
            message = _next(reader, sel, stop_fd, log_interval, lambda: _move_log(eng))
            if message is None:
                return "eof"
            if isinstance(message, str):    # STOP
                return STOP
            _handle(eng, message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gateway daemon; return its exit code."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"coc.gateway[{os.getpid()}] %(levelname)s %(message)s")
    stop = _StopSignals()
    reader = protocol.MessageReader(0, "coc.gateway's driver (stdin)")
    try:
        with _waiting(reader, stop.fd) as sel:
            first = _next(reader, sel, stop.fd)
        if isinstance(first, str):          # STOP
            _end_by(stop.signum)
        if first is None:
            raise ValueError("no configuration on stdin (expected a config message)")
        assert isinstance(first, dict)
        if first["type"] != "config":
            raise ValueError(f"the first message must be config, not {first['type']!r}")
        cfg = parse_config({k: v for k, v in first.items() if k != "type"})
        eng = _engine.Engine(**cfg["engine"])
    except (ValueError, TypeError, OSError, CocError) as exc:
        log.error("%s", exc)
        _reply({"type": "error", "message": str(exc)})
        return 2
    with eng:
        try:
            apply_delays(eng, cfg["delays"])
            apply_wire(eng, cfg["wire"])
            apply_update(eng, cfg["peers"], cfg["routes"], cfg["connect"])
            _reply({"type": "address", "address": eng.address, "self_id": eng.self_id,
                    "pid": os.getpid()})
            log.info("endpoint %d forwarding at %s", eng.self_id, eng.address)
            reason = serve(eng, reader, cfg["log_interval"], stop.fd)
        except (ValueError, TypeError, OSError, CocError) as exc:
            log.error("%s", exc)
            _reply({"type": "error", "message": str(exc)})
            return 2
        if stop.signum is not None:
            reason = stop.name or reason
        _move_log(eng)
        stats = eng.stats()
    log.info("stopping (%s): %s", reason, stats)
    _reply({"type": "exit", "reason": reason, "stats": stats})
    if stop.signum is not None:
        _end_by(stop.signum)
    return 0


def _end_by(signum: int | None) -> None:
    """End the process by ``signum`` (default action), so its parent sees what ended it.

    A daemon killed by a signal that exited with code 0 would look like a clean end.
    """
    if signum is None:       # no signal arrived: nothing to end by
        return
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pause()


if __name__ == "__main__":
    sys.exit(main())
