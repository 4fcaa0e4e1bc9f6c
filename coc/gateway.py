"""Run a gateway daemon: an engine that only forwards, driven by JSON lines on stdin.

``python -m coc.gateway`` reads its configuration as one JSON line on stdin (so the job's
secret never appears on a command line), opens an :class:`coc._engine.Engine` with
forwarding on, answers with one JSON line carrying its address, and then forwards in the
engine's progress thread — the data path never enters Python — until stdin reaches EOF or
SIGTERM/SIGINT arrives. Later lines on stdin update peers and routes. The protocol is
described in ``docs/engine.md``.
"""

import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import time

from coc._native import engine as _engine
from coc.errors import CocError, LaunchError
from coc.pycommand import python_argv
from coc.routes import apply_delays, apply_routes, delay_table, parse_routes

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

    def __init__(self):
        self.fd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)
        self.signum = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.signum = signum
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            os.write(self._wfd, b"s")
        except BlockingIOError:  # a byte is already waiting
            pass

    @property
    def name(self):
        """The received signal's name (``"SIGTERM"``), or None."""
        return None if self.signum is None else signal.Signals(self.signum).name


def _int_keys(mapping, what):
    """Return ``mapping`` with its keys (endpoint ids as JSON strings) turned into ints."""
    if not isinstance(mapping, dict):
        raise ValueError(f"gateway config: '{what}' must be an object of endpoint id -> ..., "
                         f"not {type(mapping).__name__}")
    try:
        return {int(k): v for k, v in mapping.items()}
    except ValueError as exc:
        raise ValueError(f"gateway config: '{what}' has a key that is not an endpoint id: "
                         f"{exc}") from None


def parse_config(doc):
    """Check the first JSON document and return keyword arguments for the gateway.

    Parameters
    ----------
    doc : dict
        ``self_id`` (int), ``secret`` (hex string), and optionally ``listen_host``
        (default ``"127.0.0.1"``), ``port_range`` ([min, max]), ``peers``
        ({id: address}), ``routes`` ({dest: [[hop, weight], ...]} or, per size class,
        {dest: {"small": [...], "large": [...]}}; see :mod:`coc.routes`), ``connect`` (next
        hops to connect to at once, so their loss is noticed), ``delays`` ({id: seconds}
        of emulated latency toward next hops, :mod:`coc.routes`) and ``options``
        (``eager_limit``, ``fragment_size``, ``forward_window``, ``handshake_timeout_ms``,
        ``spin_ns``, ``log_interval``).

    Returns
    -------
    dict
        ``engine`` (keyword arguments of :class:`coc._engine.Engine`), ``peers``,
        ``routes``, ``delays``, ``connect`` and ``log_interval``.

    Examples
    --------
    >>> cfg = parse_config({"self_id": 9, "secret": "00" * 16, "routes": {"1": [[1, 1]]}})
    >>> cfg["engine"]["self_id"], cfg["routes"]
    (9, {1: {'small': [(1, 1)], 'large': [(1, 1)]}})
    """
    if not isinstance(doc, dict):
        raise ValueError("gateway config must be a JSON object")
    unknown = set(doc) - {"self_id", "secret", "listen_host", "port_range", "peers", "routes",
                          "delays", "connect", "options"}
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
            "connect": _parse_connect(doc),
            "log_interval": log_interval}


def apply_update(eng, peers, routes, connect=()):
    """Give the engine its peers' addresses, then its routes; connect to ``connect`` now."""
    for pid, address in peers.items():
        eng.add_peer(pid, address)
    apply_routes(eng, routes)
    for hop in connect:
        eng.connect(hop)


#: Seconds a dialed link has to be up (connected and authenticated) before it counts as blocked.
DIAL_TIMEOUT = 10.0


def dial(eng, hops, peers, timeout=DIAL_TIMEOUT):
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


def _parse_connect(doc):
    """Return the ``connect`` list of a config or update: next hops to connect to now."""
    hops = doc.get("connect", [])
    if not isinstance(hops, list) or not all(isinstance(h, int) for h in hops):
        raise ValueError("gateway config: 'connect' must be a list of endpoint ids")
    return hops


def _reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _move_log(eng):
    for line in eng.take_log():
        log.warning("%s", line)


def _handle_line(eng, line):
    """Apply one update line and answer it with ``ok`` and the current stats.

    ``{"status": true}`` is a question, not an update: it is answered with
    ``{"status": stats}`` (coc-run's watchdog asks it).
    """
    try:
        doc = json.loads(line)
        if isinstance(doc, dict) and set(doc) == {"status"}:
            _reply({"status": eng.stats()})
            return
        if not isinstance(doc, dict) or set(doc) - {"peers", "routes", "connect", "dial",
                                                    "dial_timeout"}:
            raise ValueError("an update is an object with 'peers', 'routes', 'connect' "
                             "and/or 'dial'")
        peers = {k: str(v) for k, v in _int_keys(doc.get("peers", {}), "peers").items()}
        apply_update(eng, peers, parse_routes(doc.get("routes", {}), "gateway update"),
                     _parse_connect(doc))
        dial(eng, _parse_connect({"connect": doc.get("dial", [])}), peers,
             float(doc.get("dial_timeout", DIAL_TIMEOUT)))
    except (ValueError, TypeError, OSError, CocError) as exc:
        log.error("bad update: %s", exc)
        _reply({"error": str(exc)})
        return
    _reply({"ok": True, "stats": eng.stats()})


def serve(eng, stdin_fd, log_interval, stop_fd=None):
    """Answer update lines from ``stdin_fd`` until EOF; move engine log lines meanwhile.

    Returns ``"eof"``, or ``"stop"`` once ``stop_fd`` (if given) becomes readable.
    """
    pending = b""
    with selectors.DefaultSelector() as sel:
        sel.register(stdin_fd, selectors.EVENT_READ)
        if stop_fd is not None:
            sel.register(stop_fd, selectors.EVENT_READ)
        while True:
            ready = sel.select(log_interval)
            _move_log(eng)
            if not ready:
                continue
            if any(key.fd == stop_fd for key, _ in ready):
                return "stop"
            chunk = os.read(stdin_fd, 65536)
            if not chunk:
                return "eof"
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    _handle_line(eng, line)


def _json_keys(table):
    """Return ``table`` with endpoint-id keys as strings, the way JSON carries them."""
    return {str(k): v for k, v in (table or {}).items()}


class GatewayProcess:
    """Start and drive one gateway daemon through its stdin/stdout protocol.

    Anything that speaks the same protocol (first line: configuration, answered with the
    address; later lines: updates, answered with ``ok``; EOF: exit, answered with the final
    stats) can be driven by naming its ``module``.

    Parameters
    ----------
    config : dict
        The first line (see :func:`parse_config`); ``secret`` may be bytes.
    module : str
        The module run as ``python -m module``.
    prefix : sequence of str
        Command words put before Python (e.g. ``["taskset", "-c", "0"]``).
    timeout : float
        Seconds to wait for each answer before raising :class:`coc.errors.LaunchError`.
    stderr : file, optional
        Where the daemon's log goes (default: inherited).
    """

    def __init__(self, config, *, module="coc.gateway", prefix=(), timeout=30.0, stderr=None):
        config = dict(config)
        if isinstance(config.get("secret"), (bytes, bytearray)):
            config["secret"] = bytes(config["secret"]).hex()
        for key in ("peers", "routes"):
            if key in config:
                config[key] = _json_keys(config[key])
        self.module, self.timeout, self._buf = module, timeout, b""
        self.proc = subprocess.Popen([*prefix, *python_argv(module)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr)
        self.pid = self.proc.pid
        self.final = None
        try:
            self.hello = self.request(config)
        except BaseException:
            self.kill()
            raise
        self.address = self.hello["address"]

    def read(self, timeout=None):
        """Return the daemon's next JSON answer; LaunchError on timeout, error or exit.

        ``timeout`` in seconds defaults to the one given to the constructor.
        """
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LaunchError(f"{self.module} (pid {self.pid}) gave no answer "
                                  f"within {timeout} s")
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                if not sel.select(left):
                    continue
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self.proc.wait(timeout=5)
                raise LaunchError(f"{self.module} (pid {self.pid}) exited with code {code} "
                                  "without answering")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            raise LaunchError(f"{self.module} (pid {self.pid}): {reply['error']}")
        return reply

    def request(self, doc, timeout=None):
        """Send one JSON line and return the daemon's answer (see :meth:`read`)."""
        self.proc.stdin.write(json.dumps(doc).encode() + b"\n")
        self.proc.stdin.flush()
        return self.read(timeout)

    def update(self, peers=None, routes=None, connect=()):
        """Add peers (``{id: address}``) and routes (``{dest: [[hop, weight], ...]}``);
        connect to the next hops ``connect`` at once.

        Returns the daemon's stats once the update is applied.
        """
        return self.request({"peers": _json_keys(peers), "routes": _json_keys(routes),
                             "connect": list(connect)})["stats"]

    def stats(self):
        """Return the daemon's current engine stats."""
        return self.update()

    def stop(self, timeout=None):
        """Close stdin (the daemon's signal to exit) and return its final answer."""
        if self.final is None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.final = self.read(timeout)
                self.proc.wait(timeout=self.timeout)
            finally:
                self.kill()
        return self.final

    def kill(self):
        """Terminate the daemon (KILL after a grace period) and reap it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:  # stdin may hold unflushed bytes for a dead pipe
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


def _read_first_line(fd, stop_fd):
    """Return the first line of ``fd`` without reading past it (later lines are updates).

    Returns None if ``stop_fd`` becomes readable first.
    """
    data = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        sel.register(stop_fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            if any(key.fd == stop_fd for key, _ in sel.select()):
                return None
            byte = os.read(fd, 1)
            if not byte:
                break
            data += byte
    return bytes(data)


def main(argv=None):
    """Run the gateway daemon; return its exit code."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"coc.gateway[{os.getpid()}] %(levelname)s %(message)s")
    stop = _StopSignals()
    try:
        first = _read_first_line(0, stop.fd)
        if first is None:
            _end_by(stop.signum)
        if not first.strip():
            raise ValueError("no configuration on stdin (expected one JSON line)")
        cfg = parse_config(json.loads(first))
        eng = _engine.Engine(**cfg["engine"])
    except (ValueError, TypeError, OSError, CocError) as exc:
        log.error("%s", exc)
        _reply({"error": str(exc)})
        return 2
    with eng:
        try:
            apply_delays(eng, cfg["delays"])
            apply_update(eng, cfg["peers"], cfg["routes"], cfg["connect"])
            _reply({"address": eng.address, "self_id": eng.self_id, "pid": os.getpid()})
            log.info("endpoint %d forwarding at %s", eng.self_id, eng.address)
            reason = serve(eng, 0, cfg["log_interval"], stop.fd)
        except (ValueError, TypeError, OSError, CocError) as exc:
            log.error("%s", exc)
            _reply({"error": str(exc)})
            return 2
        if stop.signum is not None:
            reason = stop.name
        _move_log(eng)
        stats = eng.stats()
    log.info("stopping (%s): %s", reason, stats)
    _reply({"exit": reason, "stats": stats})
    if stop.signum is not None:
        _end_by(stop.signum)
    return 0


def _end_by(signum):
    """End the process by ``signum`` (default action), so its parent sees what ended it.

    A daemon killed by a signal that exited with code 0 would look like a clean end.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pause()


if __name__ == "__main__":
    sys.exit(main())
