"""End to end across real private networks: a1 -> a-gw -> b-gw -> b1 through gateway daemons.

On the two-sites testbed site a and site b share no network and no namespace forwards IP,
so the only way a message from a1 can reach b1 is through the two gateway processes. The
route comes from the topology (``coc.topology.route``), the addresses from the testbed.
"""

import json
import secrets
import subprocess
import sys
import textwrap
import warnings

import pytest

import coc._engine
from coc.errors import TopologyWarning
from coc.gateway import GatewayProcess
from coc.topology import load, route

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(not hasattr(coc._engine, "Engine"),
                       reason="coc._engine has no Engine yet (rebuild the extension with the "
                              "engine: python setup.py build_ext --inplace)"),
]

PORT = 7400  # every endpoint listens on this port in its own namespace: no collisions
MESSAGE = b"hello from site a, through both gateways"

# One rank-like endpoint: the receiver answers the sender's message, so both directions of
# the route are used; each prints its stats as one JSON line.
ENDPOINT = textwrap.dedent("""
    import json, sys
    from coc._engine import Engine
    cfg = json.loads(sys.stdin.readline())
    with Engine(cfg["id"], bytes.fromhex(cfg["secret"]), listen_host=cfg["listen"],
                port_range=(cfg["port"], cfg["port"])) as eng:
        for peer, address in cfg["peers"].items():
            eng.add_peer(int(peer), address)
        for dest, hops in cfg["routes"].items():
            eng.set_route(int(dest), hops)
        buf = bytearray(1024)
        if cfg["role"] == "receiver":
            print(json.dumps({"ready": True}), flush=True)
            st = eng.irecv(buf, source=cfg["other"], tag=7).wait(timeout=10)
            eng.isend(b"ack", cfg["other"], tag=8).wait(timeout=10)
        else:
            eng.isend(bytes.fromhex(cfg["message"]), cfg["other"], tag=7).wait(timeout=10)
            st = eng.irecv(buf, source=cfg["other"], tag=8).wait(timeout=10)
        print(json.dumps({"data": bytes(buf[:st.count]).hex(), "source": st.source,
                          "stats": eng.stats()}), flush=True)
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


def test_message_crosses_sites_only_through_the_gateways(testbeds, processes, client):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = load("two-sites")
    bed = testbeds(G)
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
                            prefix=bed.argv(host, []), timeout=15)
        processes(gw.proc)
        gateways.append(gw)

    def endpoint(host, role, other):
        peers, routes = tables[host]
        p = bed.popen(host, [sys.executable, "-c", ENDPOINT], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        processes(p)
        p.stdin.write(json.dumps({
            "id": ids[host], "secret": secret.hex(), "listen": bed.address(host), "port": PORT,
            "peers": peers, "routes": routes, "role": role, "other": ids[other],
            "message": MESSAGE.hex()}) + "\n")
        p.stdin.flush()
        return p

    receiver = endpoint("b1", "receiver", "a1")
    assert json.loads(receiver.stdout.readline()) == {"ready": True}, receiver.stderr.read()
    sender = endpoint("a1", "sender", "b1")
    out, err = sender.communicate(timeout=15)
    assert sender.returncode == 0, err
    sent = json.loads(out)
    out, err = receiver.communicate(timeout=15)
    assert receiver.returncode == 0, err
    got = json.loads(out)

    assert bytes.fromhex(got["data"]) == MESSAGE and got["source"] == ids["a1"]
    assert bytes.fromhex(sent["data"]) == b"ack" and sent["source"] == ids["b1"]
    for gw in gateways:
        stats = gw.stop(timeout=10)["stats"]
        assert stats["frames_forwarded"] >= 2, (gw.proc.args, stats)  # message and ack
        assert stats["bytes_forwarded"] >= len(MESSAGE)
