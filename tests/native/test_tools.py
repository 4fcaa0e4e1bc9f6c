"""The benchmark's reference programs (native/tools) build and relay bytes faithfully."""

import shutil
import subprocess
from pathlib import Path

import pytest
from hang_bounds import read_line, scaled

NATIVE = Path(__file__).resolve().parents[2] / "native"
TIMEOUT = scaled(60)

pytestmark = pytest.mark.skipif(shutil.which("make") is None or not NATIVE.is_dir(),
                                reason="needs make and the native/ source tree")


@pytest.fixture(scope="module")
def tools():
    build = subprocess.run(["make", "-C", str(NATIVE), "-s", "build/coc_pingpong",
                            "build/coc_relay"], capture_output=True, text=True, timeout=scaled(600))
    assert build.returncode == 0, build.stderr[-4000:]
    return NATIVE / "build" / "coc_pingpong", NATIVE / "build" / "coc_relay"


def _start(procs, *args):
    """Start a program that prints 'port N' once listening; return N."""
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, text=True)
    procs.append(proc)
    word, port = read_line(proc, 30).split()
    assert word == "port"
    return port


@pytest.mark.parametrize("relays", [0, 1, 2])
def test_pingpong_through_relays(tools, relays):
    pingpong, relay = tools
    procs = []
    try:
        port = _start(procs, pingpong, "server", "127.0.0.1", 0)
        for _ in range(relays):
            port = _start(procs, relay, "127.0.0.1", 0, "127.0.0.1", port)
        out = subprocess.run([str(pingpong), "client", "127.0.0.1", port, "0:50", "8:50",
                              f"{4 << 20}:5"], capture_output=True, text=True,
                             timeout=TIMEOUT, check=True).stdout
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(TIMEOUT)
            p.stdout.close()
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    assert [r[:2] for r in rows] == [[0, 50], [8, 50], [4 << 20, 5]]
    assert all(0 < median <= p99 for _, _, median, p99 in rows)


def test_pingpong_rejects_bad_sizes(tools):
    result = subprocess.run([str(tools[0]), "client", "127.0.0.1", "1", f"{8 << 20}:1"],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2 and "bad SIZE:ITERS" in result.stderr


@pytest.mark.parametrize("endpoints", ["c", "python"])
@pytest.mark.parametrize("gateways", [0, 2])
def test_engine_pingpong_through_gateways(tools, endpoints, gateways):
    from coc.bench.engine import run_coc

    rows = run_coc(gateways, [[8, 20], [1 << 20, 5]], endpoints=endpoints, timeout=TIMEOUT)
    assert [(r["size"], r["iters"]) for r in rows] == [(8, 20), (1 << 20, 5)]
    assert all(0 < r["median_ns"] <= r["p99_ns"] for r in rows)
