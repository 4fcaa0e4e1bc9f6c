"""Fixtures for testbed tests: root-only skipping, testbeds that always come down, sockets."""

import itertools
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import coc.testbed
from coc.errors import TopologyWarning
from coc.topology import load
from hang_bounds import read_line, scaled

ROOT_REASON = ("needs root: coc testbed builds network namespaces, veths and bridges "
               "(CI runs these as root)")

# A one-connection TCP server: prints "ready" once listening, then "got N" after reading
# everything the one client sends (until it closes), or with --rate the bytes per second
# since it listened. The clock starts before any byte can arrive, so the figure is never
# above the rate the bytes came at: started at the first read instead, a read that a busy
# machine delays finds megabytes waiting and counts them as if they had come at once.
SERVER = textwrap.dedent("""
    import socket, sys, time
    host, port, measure = sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["--rate"]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(10)
    start = time.monotonic()
    print("ready", flush=True)
    c, _ = s.accept(); c.settimeout(10)
    buf, total = bytearray(1 << 20), 0
    while n := c.recv_into(buf):
        total += n
    rate = total / (time.monotonic() - start)
    print(f"rate {rate:.0f}" if measure else f"got {total}", flush=True)
""")

# A client that connects with a timeout, sends for SECONDS (or one byte), and prints "ok" or
# the name of the error.
CLIENT = textwrap.dedent("""
    import os, socket, sys, time
    scaled = lambda s: s * float(os.environ.get("COC_TEST_TIMEOUT_SCALE") or 1)  # noqa: E731
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    try:
        c = socket.create_connection((host, port), timeout=scaled(1.0))
        c.settimeout(10.0)  # sending at a slow shaped rate may block for longer
        if seconds:
            data, end = b"x" * (1 << 20), time.monotonic() + seconds
            while time.monotonic() < end:
                c.sendall(data)
        else:
            c.sendall(b"x")
        c.close()
        print("ok")
    except OSError as exc:
        print(type(exc).__name__, exc)
""")


def pytest_runtest_setup(item):
    """Skip tests marked ``root`` with the reason when this is not root."""
    if item.get_closest_marker("root") and os.geteuid() != 0:
        pytest.skip(ROOT_REASON)


_names = itertools.count()


@pytest.fixture
def topology():
    """Return ``load(name)`` without the warnings library files give by design.

    (two-sites has one gateway per site: a single point of failure the validator warns of.)
    """
    def quiet_load(name):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TopologyWarning)
            return load(name)

    return quiet_load


@pytest.fixture
def testbeds():
    """Return ``make(topology, **kwargs) -> Testbed``; every testbed made comes down at the end."""
    made = []

    def make(topology, **kwargs):
        kwargs.setdefault("name", f"pt{os.getpid()}-{next(_names)}")
        made.append(kwargs["name"])
        return coc.testbed.up(topology, **kwargs)

    yield make
    for name in made:
        coc.testbed.down(name)


@pytest.fixture
def processes():
    """Return ``track(popen) -> popen``; tracked processes are killed and reaped at the end."""
    started = []
    yield started.append
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=scaled(10))


@pytest.fixture
def serve(processes):
    """Return ``start(bed, host, address, port, rate=False) -> Popen`` once the server listens."""

    def start(bed, host, address, port, rate=False):
        argv = [sys.executable, "-c", SERVER, address, str(port)] + (["--rate"] if rate else [])
        p = bed.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        processes(p)
        line = read_line(p, 30)
        assert line.strip() == "ready", f"server on {host} failed: {line}{p.stderr.read()}"
        return p

    return start


def connect(bed, host, address, port, seconds=0.0):
    """Connect from ``host`` to ``address:port`` (sending for ``seconds``); return the outcome."""
    done = bed.exec(host, [sys.executable, "-c", CLIENT, address, str(port), str(seconds)],
                    capture_output=True, text=True, timeout=seconds + 15)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def client():
    """Return :func:`connect`."""
    return connect
