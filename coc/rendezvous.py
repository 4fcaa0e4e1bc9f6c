"""The rank's half of the rendezvous: credentials first, then addresses for peers and routes.

``coc-run``'s site agent gives every rank one end of a socket pair, inherited as the file
descriptor named by ``COC_CONTROL_FD``, and writes a *welcome* on it at once: the rank's
endpoint id and the keys issued to it (:mod:`coc.keys`: one per peer it talks to directly;
never the job's secret), which the engine needs to open. ``coc.init()`` then calls
:func:`credentials` (open the engine with them) and :func:`rendezvous` with the engine's
address; that blocks until every rank and gateway daemon of the job has sent its address,
and returns the peers and the route table. The keys never appear in the environment or on
a command line.

The socket stays open for the rest of the job: :func:`serve_control` answers ``status``
requests (what the engine has moved, which operations are pending: coc-run's watchdog) and
takes ``exited`` notices (a rank that ended normally: receives from it fail instead of
waiting forever) in a daemon thread.

Ranks that a site's ``mpiexec`` starts cannot inherit that socket (mpiexec's proxies do not
pass file descriptors on): each process mpiexec starts runs :func:`shepherd`, which fetches
the rank's socket, pipes and environment from the agent over the Unix socket named by
``COC_CONTROL_SOCKET`` and starts the rank with them (``coc.launcher.spawners.mpiexec``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Optional, TypedDict

from coc import keys, protocol
from coc.childprocess import die_with_parent
from coc.errors import CocError, ControlError, LaunchError
from coc.routes import Routes, Wire, delay_table, parse_routes, wire_table

if TYPE_CHECKING:
    from coc._native import engine as _native

__all__ = ["CONTROL_FD", "CONTROL_SOCKET", "credentials", "rendezvous", "serve_control",
           "shepherd"]

#: Environment variable naming the inherited rendezvous socket.
CONTROL_FD = "COC_CONTROL_FD"
#: Environment variable naming the agent's Unix socket, for the shepherds of a site's mpiexec.
CONTROL_SOCKET = "COC_CONTROL_SOCKET"
_ACK_TIMEOUT = 10.0      # seconds a shepherd waits for the agent to pass its exit on

_AGENT = "coc-run's agent"


class Credentials(TypedDict):
    """What :func:`credentials` returns: this rank, the job, and the keys issued to it."""

    rank: int
    size: int
    self_id: int                             # the engine's endpoint id
    job_id: str
    keys: dict[int, tuple[bytes, bool]]      # peer id -> (key, is a gateway)


class Rendezvous(Credentials, total=False):
    """What :func:`rendezvous` returns: the credentials and what the agent answered."""

    peers: dict[int, str]                    # endpoint id -> address
    routes: Routes
    placement: list[tuple[str, ...]]         # (site, host) of every rank
    delays: dict[int, float]
    wire: dict[int, Wire]


class _State(TypedDict):
    socket: Optional[socket.socket]
    reader: Optional[protocol.MessageReader]
    welcome: Optional[Credentials]


_state: _State = {"socket": None, "reader": None, "welcome": None}

#: ``describe(engine.pending())``: what a ``status`` answer says this rank waits for.
Describe = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _next(reader: protocol.MessageReader) -> dict[str, Any]:
    """Return the agent's next message on the rendezvous socket; raise if it hung up."""
    message = reader.read()
    if message is None:
        raise ControlError(f"{_AGENT} closed the rendezvous socket")
    return message


def _receive(expected: str) -> dict[str, Any]:
    """Return the next message from the agent, checking its type."""
    reader = _state["reader"]
    assert reader is not None            # _socket() made it
    try:
        message = _next(reader)
    except (ControlError, OSError) as exc:
        raise LaunchError(f"the job was torn down before the rendezvous completed ({exc})")
    if message["type"] != expected:
        raise ControlError(f"expected a {expected} message, got {message['type']!r}")
    return message


def _socket(environ: Mapping[str, str] | None) -> socket.socket:
    """Return the inherited rendezvous socket, opening it on first use."""
    if _state["socket"] is None:
        environ = os.environ if environ is None else environ
        if CONTROL_FD not in environ:
            raise LaunchError(f"{CONTROL_FD} is not set: start this program with coc-run")
        try:
            sock = socket.socket(fileno=int(environ[CONTROL_FD]))
        except (ValueError, OSError) as exc:
            raise LaunchError(f"{CONTROL_FD}={environ[CONTROL_FD]!r} is not an open socket: "
                              f"{exc}") from None
        _state["socket"] = sock
        _state["reader"] = protocol.MessageReader(sock.fileno(), _AGENT)
        return sock
    return _state["socket"]


def credentials(environ: Mapping[str, str] | None = None) -> Credentials:
    """Return what opening the engine needs: this endpoint's id and the keys issued to it.

    Parameters
    ----------
    environ : mapping, optional
        Where to find ``COC_CONTROL_FD`` (default ``os.environ``).

    Returns
    -------
    dict
        ``rank``, ``size``, ``self_id`` (the engine's endpoint id), ``job_id`` and
        ``keys`` (``{peer id: (key bytes, is_gateway)}``, :class:`coc._engine.Engine`'s
        ``keys``).

    Raises
    ------
    LaunchError
        When the process was not started by ``coc-run`` or the job was torn down.
    """
    kept = _state["welcome"]
    if kept is None:
        _socket(environ)
        welcome = _receive("welcome")
        try:
            issued = keys.table(welcome.get("keys"), "the welcome from coc-run's agent")
        except ValueError as exc:
            raise ControlError(str(exc)) from None
        kept = _state["welcome"] = {"rank": welcome["rank"], "size": welcome["size"],
                                    "self_id": welcome["self_id"],
                                    "job_id": welcome["job_id"], "keys": issued}
    return kept.copy()


def rendezvous(address: str, environ: Mapping[str, str] | None = None) -> Rendezvous:
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
        other rank and gateway daemon), ``routes`` ({destination endpoint id: {"small":
        [(next hop endpoint id, weight), ...], "large": [...]}} as
        :func:`coc.routes.parse_routes` gives; a hop equal to the destination means
        "directly"), ``placement`` ([(site, host)] of every rank, indexed by rank) and
        ``delays`` ({next hop endpoint id: seconds} of emulated latency).

    Raises
    ------
    LaunchError
        When the process was not started by ``coc-run`` or the job was torn down meanwhile.
    """
    info = Rendezvous(**credentials(environ))
    sock = _state["socket"]
    assert sock is not None              # credentials() opened it
    try:
        sock.sendall(protocol.encode({"type": "address", "address": address}))
    except OSError as exc:
        raise LaunchError(f"the job was torn down before the rendezvous completed ({exc})")
    answer = _receive("rendezvous")
    info["peers"] = {int(k): v for k, v in answer["peers"].items()}
    try:
        info["routes"] = parse_routes(answer["routes"], "rendezvous answer")
    except ValueError as exc:
        raise LaunchError(str(exc), rank=info["rank"]) from None
    info["placement"] = [tuple(where) for where in answer["placement"]]
    try:
        info["delays"] = delay_table(answer.get("delays", {}), "rendezvous answer")
        info["wire"] = wire_table(answer.get("wire", {}), "rendezvous answer")
    except ValueError as exc:
        raise LaunchError(str(exc), rank=info["rank"]) from None
    return info


def serve_control(engine: _native.Engine, describe: Describe) -> threading.Thread | None:
    """Answer coc-run over the rendezvous socket from a daemon thread, until it closes.

    ``status`` gets ``progress`` (the sends and receives the engine has completed: it moves
    while the job's operations do, not with frames sent again), ``pending`` (``describe(engine.pending())``: what this rank waits
    for) and ``log`` (the engine's latest log lines); ``exited`` tells the engine a rank has ended (:meth:`Engine.peer_exited`).
    Does nothing without a rendezvous socket (a process not started by coc-run).
    """
    sock = _state["socket"]
    if sock is None:
        return None
    thread = threading.Thread(target=_control_loop,
                              args=(sock, _state["reader"], engine, describe),
                              name="coc control", daemon=True)
    thread.start()
    return thread


#: How many of the engine's latest log lines a ``status`` answer carries.
STATUS_LOG_LINES = 12


def _control_loop(sock: socket.socket, reader: protocol.MessageReader, engine: _native.Engine,
                  describe: Describe) -> None:
    recent: collections.deque[str] = collections.deque(maxlen=STATUS_LOG_LINES)
    while True:
        try:
            message = _next(reader)
        except (ControlError, OSError):
            return                     # the agent closed it: the job is ending
        try:
            if message["type"] == "status":
                sock.sendall(protocol.encode({"type": "status", "id": message.get("id"),
                                              **_status(engine, describe, recent)}))
            elif message["type"] == "exited":
                with contextlib.suppress(CocError):    # closed: nothing waits any more
                    engine.peer_exited(message["rank"])
        except OSError:
            return


def _status(engine: _native.Engine, describe: Describe, recent: collections.deque[str]
            ) -> dict[str, Any]:
    """Return what a ``status`` answer carries besides its type and id.

    ``log`` is the engine's latest log lines (connections lost, routes moved, frames sent
    again), kept across answers in ``recent``: when a job stalls, the watchdog's report
    shows what each waiting rank's engine saw last.
    """
    try:
        stats = engine.stats()
        recent.extend(engine.take_log())
        return {"progress": stats["requests_completed"],
                "pending": describe(engine.pending()), "log": list(recent)}
    except CocError:                   # the engine has closed (finalize): nothing pending
        return {"progress": 0, "pending": [], "finalized": True}


def _receive_start(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Return the agent's ``start`` message and the file descriptors that came with it.

    The descriptors travel with the message's header, so the header is read here; the
    rest is read as any other message.
    """
    header, fds, _, _ = socket.recv_fds(sock, 4, 4)
    return _next(protocol.MessageReader(sock.fileno(), _AGENT, header)), fds


def shepherd(environ: Mapping[str, str] | None = None) -> int:
    """Start this process's coc rank as the agent says, report its exit; return our status.

    Run by each process a site's ``mpiexec`` starts. The rank gets its stdio and rendezvous
    socket from the agent and keeps mpiexec's ``PMI_*`` variables and ``PMI_FD``, so it
    joins the site's MPI job too. Returns 0 once the agent has taken the exit (so mpiexec
    does not abort the others: coc-run stops the job), else the rank's status.
    """
    environ = dict(os.environ if environ is None else environ)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(environ.pop(CONTROL_SOCKET))
    sock.sendall(protocol.encode({"type": "attach", "index": int(environ["PMI_RANK"]),
                                  "pid": os.getpid()}))
    start, fds = _receive_start(sock)
    stdout, stderr, control, *stdin = fds
    env = {**environ, **start["env"], CONTROL_FD: str(control)}
    keep = [control] + ([int(environ["PMI_FD"])] if environ.get("PMI_FD", "").isdigit() else [])
    try:
        program = subprocess.Popen(
            start["argv"], stdin=stdin[0] if stdin else subprocess.DEVNULL, stdout=stdout,
            stderr=stderr, env=env, pass_fds=keep, start_new_session=True,
            preexec_fn=die_with_parent)
        pid, failed = program.pid, None
    except OSError as exc:
        os.write(stderr, f"cannot execute {start['argv'][0]!r}: {exc.strerror}\n".encode())
        pid, failed = os.getpid(), 127 if isinstance(exc, FileNotFoundError) else 126
    for fd in fds:
        os.close(fd)
    sock.sendall(protocol.encode({"type": "started", "pid": pid}))
    if failed is None:
        for sig in (signal.SIGTERM, signal.SIGINT):   # mpiexec's signals go to the rank
            signal.signal(sig, lambda s, _: os.killpg(program.pid, s))
        status = program.wait()
    else:
        status = failed
    code, signum = (status, None) if status >= 0 else (None, -status)
    sock.sendall(protocol.encode({"type": "exit", "code": code, "signal": signum}))
    sock.settimeout(_ACK_TIMEOUT)
    try:
        acknowledged = sock.recv(1) == b""    # the agent closes once coc-run knows
    except OSError:
        acknowledged = False
    return 0 if acknowledged else (status if signum is None else 128 + signum)



if __name__ == "__main__":
    sys.exit(shepherd())
