"""The driver's side of a gateway daemon's control channel: its messages and one client.

A gateway daemon (``python -m coc.gateway``) is driven over its stdin/stdout with
:mod:`coc.protocol` messages. The driver sends ``config`` first (answered by ``address``),
then any number of ``update`` (answered by ``ok`` with the stats once applied, or
``error``) and ``status`` (answered by ``status`` with the stats); closing stdin, SIGTERM or
SIGINT end the daemon, which says ``exit`` with its final stats first. The messages are
built and read here only: :class:`GatewayProcess` drives a daemon synchronously (tests,
benchmarks), and coc-run's site agent (``coc.launcher.agent``) drives its daemons in
asyncio with the same builders and :func:`answer`.

This module loads neither the engine nor the launcher: both sides import it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from coc import protocol
from coc.errors import LaunchError
from coc.pycommand import python_argv

__all__ = ["STATUS", "config", "update", "answer", "GatewayProcess"]

#: The request for a daemon's stats, answered ``{"type": "status", "stats": {...}}``.
STATUS: dict[str, Any] = {"type": "status"}


def _json_keys(table: Mapping[Any, Any] | None) -> dict[str, Any]:
    """Return ``table`` with endpoint-id keys as strings, the way JSON carries them."""
    return {str(k): v for k, v in (table or {}).items()}


def config(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``config`` message of a daemon from ``doc`` (see ``coc.gateway.parse_config``).

    ``secret`` may be bytes, and the keys of ``peers`` and ``routes`` integers.

    Examples
    --------
    >>> config({"self_id": 9, "secret": b"\\x01\\x02", "peers": {1: "tcp://a:1"}})
    {'type': 'config', 'self_id': 9, 'secret': '0102', 'peers': {'1': 'tcp://a:1'}}
    """
    message = {"type": "config", **doc}
    if isinstance(message.get("secret"), (bytes, bytearray)):
        message["secret"] = bytes(message["secret"]).hex()
    for key in ("peers", "routes"):
        if key in message:
            message[key] = _json_keys(message[key])
    return message


def update(peers: Mapping[Any, str] | None = None, routes: Mapping[Any, Any] | None = None,
           connect: Iterable[int] = (), dial: Iterable[int] = (),
           dial_timeout: float | None = None) -> dict[str, Any]:
    """Return an ``update`` message: add ``peers`` ({id: address}) and ``routes`` ({dest:
    [[hop, weight], ...]}), connect to the next hops ``connect`` at once, and connect to
    ``dial`` answering only once those links are up (bounded by ``dial_timeout`` seconds).

    Examples
    --------
    >>> update({2: "tcp://b:1"}, dial=[2])
    {'type': 'update', 'peers': {'2': 'tcp://b:1'}, 'dial': [2]}
    """
    message: dict[str, Any] = {"type": "update"}
    for key, value in (("peers", _json_keys(peers)), ("routes", _json_keys(routes)),
                       ("connect", list(connect)), ("dial", list(dial)),
                       ("dial_timeout", dial_timeout)):
        if value or (key == "dial_timeout" and value is not None):
            message[key] = value
    return message


def answer(message: dict[str, Any], peer: str) -> dict[str, Any]:
    """Return a daemon's answer ``message``; raise :class:`LaunchError` for an ``error``.

    ``peer`` names the daemon in the error (``"gateway daemon 10"``).
    """
    if message["type"] == "error":
        raise LaunchError(f"{peer}: {message.get('message')}")
    return message


class GatewayProcess:
    """Start and drive one gateway daemon synchronously over its stdin/stdout.

    Anything that speaks the same protocol (first message ``config``, answered by
    ``address``; later requests answered each by one message; EOF: final stats) can be
    driven by naming its ``module``, as the engine benchmark's endpoints are
    (``coc.bench.engine``).

    Parameters
    ----------
    doc : dict
        The configuration (see :func:`config`).
    module : str
        The module run as ``python -m module``.
    prefix : sequence of str
        Command words put before Python (e.g. ``["taskset", "-c", "0"]``).
    timeout : float
        Seconds to wait for each answer before raising :class:`coc.errors.ControlError`.
    stderr : file, optional
        Where the daemon's log goes (default: inherited).
    """

    def __init__(self, doc: Mapping[str, Any], *, module: str = "coc.gateway",
                 prefix: Sequence[str] = (), timeout: float = 30.0,
                 stderr: IO[Any] | int | None = None) -> None:
        self.module, self.timeout = module, timeout
        self.proc = subprocess.Popen([*prefix, *python_argv(module)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.pid = self.proc.pid
        self.peer = f"{module} (pid {self.pid})"
        self._reader = protocol.MessageReader(self._stdout.fileno(), self.peer)
        self.final: dict[str, Any] | None = None
        try:
            self.hello = self.request(config(doc))
        except BaseException:
            self.kill()
            raise
        self.address = self.hello["address"]

    def read(self, timeout: float | None = None) -> dict[str, Any]:
        """Return the daemon's next message (see :func:`answer`).

        ``timeout`` in seconds defaults to the one given to the constructor.

        Raises
        ------
        LaunchError
            The daemon answered ``error``, or exited without answering.
        ControlError
            No answer within ``timeout``, or a garbled one.
        """
        message = self._reader.read(self.timeout if timeout is None else timeout)
        if message is None:
            code = self.proc.wait(timeout=5)
            raise LaunchError(f"{self.peer} exited with code {code} without answering")
        return answer(message, self.peer)

    def request(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send one message and return the daemon's answer (see :meth:`read`)."""
        try:
            protocol.write_message(self._stdin.fileno(), message)
        except BrokenPipeError:
            pass                      # it has ended: read() reports how
        return self.read(timeout)

    def update(self, peers: Mapping[Any, str] | None = None,
               routes: Mapping[Any, Any] | None = None,
               connect: Iterable[int] = ()) -> dict[str, Any]:
        """Add peers (``{id: address}``) and routes (``{dest: [[hop, weight], ...]}``);
        connect to the next hops ``connect`` at once.

        Returns the daemon's stats once the update is applied.
        """
        return self.request(update(peers, routes, connect))["stats"]

    def stats(self) -> dict[str, Any]:
        """Return the daemon's current engine stats."""
        return self.request(STATUS)["stats"]

    def stop(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Close stdin (the daemon's signal to exit) and return its final ``exit`` message."""
        if self.final is None and self.proc.poll() is None:
            try:
                self._stdin.close()
                self.final = self.read(timeout)
                self.proc.wait(timeout=self.timeout)
            finally:
                self.kill()
        return self.final

    def kill(self) -> None:
        """Terminate the daemon (KILL after a grace period) and reap it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self._stdin, self._stdout):
            try:
                f.close()
            except OSError:  # stdin may hold unflushed bytes for a dead pipe
                pass

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
