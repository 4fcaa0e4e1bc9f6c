"""How long until an endpoint hears that another one died behind a gateway.

A gateway that sees an endpoint's connection end without BYE dials that endpoint back
before reporting it lost (docs/wire-protocol.md, "Gateways and routes"): a dead process
refuses the dial and is reported at once; a stopped one is reported when the dial's
handshake times out. This measures what the dial costs a real death.

Endpoint 1 runs here; endpoint 2 is a child process; gateway 10 is a daemon
(``python -m coc.gateway``). Per run, endpoint 1 posts a receive from 2, the child is
signalled, and the time from the signal to the receive failing with ``PeerLost`` is taken:

- **gateway, kill**: 1 reaches 2 through gateway 10; SIGKILL (the gateway's dial is refused);
- **direct, kill** (the reference, same run): 1 is connected to 2 itself; SIGKILL (1 reads
  the end of its connection);
- **gateway, stop** (``--stop``): SIGSTOP instead: the gateway's liveness verdict, then its
  dial's handshake deadline (both the liveness timeout), bound the report.

Prints medians and spreads (min..max) and the ratio gateway/direct. Run:
``python benchmarks/endpoint_loss.py [--runs N] [--stop] [--liveness-ms MS]``.
"""

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time

SECRET = b"endpoint-loss-benchmark-secret32"
TIMEOUT = 60


def child(conn, hop):
    """Endpoint 2: send its address, take its peers and route, connect, then idle."""
    from coc._native import engine
    eng = engine.Engine(2, SECRET, listen_host="127.0.0.1")
    conn.send(eng.address)
    if not conn.poll(TIMEOUT):
        return
    peers, route = conn.recv()
    for pid, address in peers.items():
        eng.add_peer(pid, address)
    eng.set_route(1, route)
    eng.connect(hop)
    conn.send("connected")
    time.sleep(TIMEOUT * 4)


def one(ctx, via_gateway, sig):
    """One run: seconds from signalling endpoint 2 to endpoint 1's receive failing."""
    from coc import errors
    from coc._native import engine
    from coc.gateway import GatewayProcess
    me = engine.Engine(1, SECRET, listen_host="127.0.0.1")
    parent, end = ctx.Pipe()
    proc = ctx.Process(target=child, args=(end, 10 if via_gateway else 1), daemon=True)
    proc.start()
    gw = None
    try:
        assert parent.poll(TIMEOUT), "endpoint 2 did not send its address"
        address = parent.recv()
        if via_gateway:
            gw = GatewayProcess({"self_id": 10, "secret": SECRET,
                                 "peers": {1: me.address, 2: address},
                                 "routes": {1: [[1, 1]], 2: [[2, 1]]}}, timeout=TIMEOUT,
                                stderr=subprocess.DEVNULL)
            me.add_peer(10, gw.address)
            me.set_route(2, [10])
            me.connect(10)
            parent.send(({10: gw.address}, [10]))
        else:
            me.add_peer(2, address)
            me.set_route(2, [2])
            parent.send(({1: me.address}, [1]))
        assert parent.poll(TIMEOUT) and parent.recv() == "connected"
        deadline = time.monotonic() + TIMEOUT
        while via_gateway and gw.stats()["connections_open"] < 2:
            assert time.monotonic() < deadline, "the endpoints never connected to the gateway"
            time.sleep(0.005)
        while not via_gateway and not me.connected(2):
            assert time.monotonic() < deadline, "endpoint 2 never connected"
            time.sleep(0.005)
        recv = me.irecv(bytearray(8), 2)
        start = time.monotonic()
        os.kill(proc.pid, sig)
        try:
            recv.wait(TIMEOUT)
        except errors.PeerLost:
            return time.monotonic() - start
        raise AssertionError("the receive did not fail with PeerLost")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(5)
        if gw is not None:
            gw.kill()
        me.close()


def summary(name, times, ref=None):
    """One line: median and spread in ms (and the ratio to ``ref``'s median)."""
    med = statistics.median(times)
    line = (f"{name:16s} median {med * 1e3:8.2f} ms  spread {min(times) * 1e3:.2f}.."
            f"{max(times) * 1e3:.2f} ms  ({len(times)} runs)")
    if ref:
        line += f"  {med / statistics.median(ref):.2f}x direct"
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stop", action="store_true", help="also SIGSTOP (bounded by liveness)")
    parser.add_argument("--liveness-ms", type=int, default=1000)
    args = parser.parse_args(argv)
    os.environ["COC_LIVENESS_MS"] = str(args.liveness_ms)  # engines, children and daemons
    ctx = multiprocessing.get_context("spawn")
    modes = [("direct, kill", False, signal.SIGKILL), ("gateway, kill", True, signal.SIGKILL)]
    if args.stop:
        modes.append(("gateway, stop", True, signal.SIGSTOP))
    times = {name: [] for name, _, _ in modes}
    for _ in range(args.runs):  # interleaved, so load changes hit every mode alike
        for name, via, sig in modes:
            times[name].append(one(ctx, via, sig))
    print(f"endpoint loss heard by another endpoint; liveness {args.liveness_ms} ms; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    ref = times["direct, kill"]
    for name, _, _ in modes:
        print(summary(name, times[name], None if name == "direct, kill" else ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
