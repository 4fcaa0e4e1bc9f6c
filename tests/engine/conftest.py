"""Fixtures for engine tests: endpoints in this process, in spawned children, and gateways."""

import multiprocessing
import os
import sys
import tempfile
import time

import pytest

# Children are spawned and import their programs by name, so put this folder on sys.path
# (spawned children inherit sys.path).
sys.path.insert(0, os.path.dirname(__file__))

import engine_peers  # noqa: E402

from coc._native import engine  # noqa: E402
from coc.gatewayclient import GatewayProcess  # noqa: E402
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
SECRET = engine_peers.SECRET


class Peer:
    """One engine in a spawned child process running a scenario of engine_peers."""

    def __init__(self, ctx, self_id, scenario, args, secret, engine_kwargs, hold):
        self.id, self.hold = self_id, hold
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=engine_peers.run, daemon=True,
                                args=(child, self_id, secret, engine_kwargs, scenario, args,
                                      hold))
        self.proc.start()
        child.close()
        self.address = self.recv()

    def recv(self, timeout=TIMEOUT):
        """Return the next message from the child; fail the test on timeout or error."""
        if not self.conn.poll(timeout):
            raise AssertionError(f"endpoint {self.id} (pid {self.proc.pid}) sent nothing "
                                 f"within {timeout} s")
        msg = self.conn.recv()
        if isinstance(msg, tuple) and msg[0] == "error":
            raise AssertionError(f"endpoint {self.id} failed: {msg[1]}: {msg[2]}\n{msg[3]}")
        return msg

    def connect(self, peers, routes):
        """Give the child its peers ``{id: address}`` and routes ``{dest: [hops]}``,
        ``{dest: ([hops], [weights])}`` or route table documents (``{dest: {"small":
        [[hop, weight], ...], "large": [...]}}``, see coc.routes); return once set."""
        routes = {d: (r if isinstance(r, dict)
                      else list(zip(*r)) if isinstance(r, tuple) and r[1] is not None
                      else [[h, 1] for h in (r[0] if isinstance(r, tuple) else r)])
                  for d, r in routes.items()}
        self.conn.send((peers, routes))
        assert self.recv() == "ready"

    def result(self, timeout=TIMEOUT):
        """Return what the scenario returned (and let a holding child close its engine)."""
        status, value = self.recv(timeout)
        assert status == "ok"
        if self.hold:
            self.conn.send("close")
        return value

    def reap(self):
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


@pytest.fixture
def spawn():
    """Start ``spawn(self_id, scenario, **args)`` endpoints in children; reap them all.

    ``hold=False`` lets the child close its engine as soon as the scenario returns.
    """
    ctx = multiprocessing.get_context("spawn")
    started = []

    def start(self_id, scenario, *, secret=SECRET, engine_kwargs=None, hold=True, **args):
        peer = Peer(ctx, self_id, scenario, args, secret, engine_kwargs or {}, hold)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.reap()


@pytest.fixture
def open_engine():
    """Open ``open_engine(self_id, **kwargs)`` engines in this process; close them all."""
    opened = []

    def open_(self_id, *, secret=SECRET, **kwargs):
        kwargs.setdefault("listen_host", "127.0.0.1")
        eng = engine.Engine(self_id, secret, **kwargs)
        opened.append(eng)
        return eng

    yield open_
    for eng in opened:
        eng.close()


@pytest.fixture
def gateway():
    """Start ``gateway(self_id, peers=..., routes=...)`` daemons; kill and reap them all.

    A daemon's log is printed when the test fails (pytest shows captured stdout).
    """
    started = []

    def start(self_id, *, secret=SECRET, peers=None, routes=None, options=None,
              port_range=(0, 0), wire=None):
        log = tempfile.TemporaryFile()
        gw = GatewayProcess({"self_id": self_id, "secret": secret, "peers": peers or {},
                             "routes": routes or {}, "options": options or {},
                             "port_range": list(port_range), "wire": wire or {}},
                            timeout=TIMEOUT, stderr=log)
        gw.log = log
        started.append((gw, log))
        return gw

    yield start
    for gw, log in started:
        gw.kill()
        text = engine_peers.gateway_log(gw)
        if text:
            print(f"--- gateway {gw.pid} log ---\n{text}")
        log.close()


@pytest.fixture
def idle_child_behind_gateway(open_engine, spawn, gateway):
    """Endpoint 1 (here) and endpoint 2 (a child that idles) behind gateway 10, both
    connected to it: (engine 1, child, gateway daemon)."""
    me = open_engine(1)
    child = spawn(2, "connect_and_idle", hop=10)
    gw = gateway(10, peers={1: me.address, 2: child.address}, routes={1: [[1, 1]], 2: [[2, 1]]})
    me.add_peer(10, gw.address)
    me.set_route(2, [10])
    me.connect(10)
    child.connect({10: gw.address}, {1: [10]})
    assert child.recv() == "connected"
    deadline = time.monotonic() + TIMEOUT
    while gw.stats()["connections_open"] < 2:
        assert time.monotonic() < deadline, "the endpoints never connected to the gateway"
        time.sleep(0.01)
    return me, child, gw

