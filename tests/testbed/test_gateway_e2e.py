"""End to end across real private networks: a1 -> a-gw -> b-gw -> b1 through gateway daemons.

On the two-sites testbed site a and site b share no network and no namespace forwards IP,
so the only way a message from a1 can reach b1 is through the two gateway processes. The
route comes from the topology (``coc.topology.route``), the addresses from the testbed.
"""

import hashlib
import json
import random
import secrets
import subprocess
import sys
import textwrap

import pytest

import coc._engine
from coc.gateway import GatewayProcess
from coc.topology import route
from hang_bounds import scaled

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(not hasattr(coc._engine, "Engine"),
                       reason="coc._engine has no Engine yet (rebuild the extension with the "
                              "engine: python setup.py build_ext --inplace)"),
]

PORT = 7400  # every endpoint listens on this port in its own namespace: no collisions

# One rank-like endpoint. "sender" sends SIZE bytes made from SEED and "receiver" answers
# with their SHA-256, so both directions of the route are used; "ping" times ROUNDS round
# trips of 8 bytes to "pong". Each prints one JSON line.
ENDPOINT = textwrap.dedent("""
    import hashlib, json, random, sys, time
    from coc._engine import Engine
    cfg = json.loads(sys.stdin.readline())
    other = cfg["other"]
    with Engine(cfg["id"], bytes.fromhex(cfg["secret"]), listen_host=cfg["listen"],
                port_range=(cfg["port"], cfg["port"])) as eng:
        for peer, address in cfg["peers"].items():
            eng.add_peer(int(peer), address)
        for dest, hops in cfg["routes"].items():
            eng.set_route(int(dest), hops)
        for peer, seconds in cfg.get("delays", {}).items():
            eng.set_peer_delay(int(peer), seconds)
        buf = bytearray(max(cfg.get("size", 0), 64))
        out = {}
        if cfg["role"] in ("receiver", "pong"):
            print(json.dumps({"ready": True}), flush=True)
        if cfg["role"] == "receiver":
            st = eng.irecv(buf, source=other, tag=7).wait(timeout=scaled(10))
            out["sha256"] = hashlib.sha256(buf[:st.count]).hexdigest()
            eng.isend(out["sha256"].encode(), other, tag=8).wait(timeout=scaled(10))
        elif cfg["role"] == "sender":
            data = random.Random(cfg["seed"]).randbytes(cfg["size"])
            eng.isend(data, other, tag=7).wait(timeout=scaled(10))
            st = eng.irecv(buf, source=other, tag=8).wait(timeout=scaled(10))
            out["sha256"] = bytes(buf[:st.count]).decode()
        else:
            rtts = []
            for _ in range(cfg["rounds"]):
                start = time.perf_counter()
                if cfg["role"] == "ping":
                    eng.isend(b"8 bytes!", other, tag=9).wait(timeout=scaled(10))
                st = eng.irecv(buf, source=other, tag=9).wait(timeout=scaled(10))
                if cfg["role"] == "pong":
                    eng.isend(b"8 bytes!", other, tag=9).wait(timeout=scaled(10))
                rtts.append(time.perf_counter() - start)
            out["rtt"] = min(rtts)
        out.update(count=st.count, source=st.source, stats=eng.stats())
        print(json.dumps(out), flush=True)
""")


def _tcp(address):
    return f"tcp://{address}:{PORT}"


def _tables(bed, path):
    """Return {host: (peers, routes)} along ``path``: each host knows only its neighbours."""
    ids = {hop.host: i + 1 for i, hop in enumerate(path.hops)}
    ids[path.hosts[-1]] = len(path.hosts)
    src, dst = ids[path.hosts[0]], ids[path.hosts[-1]]
    tables = {h: ({}, {}) for h in path.hosts}
    for hop in path.hops:  # forward: host -> next_host over hop.network, and the way back
        here, there = hop.host, hop.next_host
        tables[here][0][ids[there]] = _tcp(bed.address(there, hop.network))
        tables[here][1][dst] = [ids[there]]
        tables[there][0][ids[here]] = _tcp(bed.address(here, hop.network))
        tables[there][1][src] = [ids[here]]
    return ids, tables


def _endpoint(bed, processes, host, **cfg):
    """Start an ENDPOINT in ``host``'s namespace with ``cfg``; wait until a server is ready."""
    p = bed.popen(host, [sys.executable, "-c", ENDPOINT], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes(p)
    p.stdin.write(json.dumps({"port": PORT, **cfg}) + "\n")
    p.stdin.flush()
    if cfg["role"] in ("receiver", "pong"):
        line = p.stdout.readline()
        assert line and json.loads(line) == {"ready": True}, p.stderr.read()
    return p


def _result(p):
    out, err = p.communicate(timeout=scaled(15))
    assert p.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def two_sites(testbeds, topology):
    G = topology("two-sites")
    return G, testbeds(G)


@pytest.mark.parametrize("size", [41, 1 << 20], ids=["eager-41B", "rendezvous-1MiB"])
def test_message_crosses_sites_only_through_the_gateways(two_sites, processes, client, size):
    G, bed = two_sites
    path = route(G, "a1", "b1")
    assert path.hosts == ("a1", "a-gw", "b-gw", "b1")
    ids, tables = _tables(bed, path)
    secret = secrets.token_bytes(32)

    # No shortcut: a1 cannot even open a TCP connection to b1's engine port.
    assert "Network is unreachable" in client(bed, "a1", bed.address("b1"), PORT)

    gateways = []
    for host in ("a-gw", "b-gw"):
        peers, routes = tables[host]
        gw = GatewayProcess({"self_id": ids[host], "secret": secret, "listen_host": "0.0.0.0",
                             "port_range": [PORT, PORT], "peers": peers,
                             "routes": {d: [[h, 1] for h in hops] for d, hops in routes.items()}},
                            prefix=bed.argv(host, []), timeout=scaled(15))
        processes(gw.proc)
        gateways.append(gw)

    def endpoint(host, role, other):
        peers, routes = tables[host]
        return _endpoint(bed, processes, host, id=ids[host], secret=secret.hex(),
                         listen=bed.address(host), peers=peers, routes=routes, role=role,
                         other=ids[other], size=size, seed=size)

    receiver = endpoint("b1", "receiver", "a1")
    sent = _result(endpoint("a1", "sender", "b1"))
    got = _result(receiver)

    expected = hashlib.sha256(random.Random(size).randbytes(size)).hexdigest()
    assert (got["sha256"], got["count"], got["source"]) == (expected, size, ids["a1"])
    assert (sent["sha256"], sent["source"]) == (expected, ids["b1"])  # the answer came back
    for gw in gateways:
        stats = gw.stop(timeout=scaled(10))["stats"]
        assert stats["frames_forwarded"] >= 2, (gw.proc.args, stats)  # message and answer
        assert stats["bytes_forwarded"] >= size


def test_wan_latency_is_emulated_by_the_engine_where_the_kernel_cannot(two_sites, processes):
    """The documented fallback: Engine.set_peer_delay with Testbed.latency gives the WAN's 1 ms."""
    _, bed = two_sites
    wan = bed.latency("a-gw", "b-gw")
    assert wan == pytest.approx(1e-3)
    secret = secrets.token_bytes(32).hex()
    ids = {"a-gw": 1, "b-gw": 2}
    ends = []
    for host, other, role in (("b-gw", "a-gw", "pong"), ("a-gw", "b-gw", "ping")):
        ends.append(_endpoint(
            bed, processes, host, id=ids[host], secret=secret, listen=bed.address(host, "wan"),
            peers={ids[other]: _tcp(bed.address(other, "wan"))},
            routes={ids[other]: [ids[other]]}, delays={ids[other]: wan}, role=role,
            other=ids[other], rounds=20))
    rtt = _result(ends[1])["rtt"]
    _result(ends[0])
    # the model's latency is applied on each crossing; the upper bound only catches a hang
    assert 2 * wan <= rtt < 2 * wan + scaled(5.0), f"round trip {rtt * 1e3:.3f} ms"
