"""The rank ``coc doctor`` runs on every host: what the host has, then short probes.

Before joining the job each rank reports its host's Python, coc version and which of the
interfaces the topology declares for the host carry their address (``ip -o addr``), so a
missing interface is reported even when it then keeps the rank from listening. After
``coc.init()`` rank 0 measures, against every other rank, the clock offset (NTP-style:
the other's clock minus the midpoint of the exchange with the shortest round trip), the
one-way latency (half the median round trip of 8-byte messages) and the bandwidth (a
1 MiB message). Every result is one line ``coc-doctor {json}`` on stdout.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coc.comm import Communicator

#: This host's clock as the probe reads it (time.time(), plus a test's fake offset).
Clock = Callable[[], float]

#: Prefix of the lines :mod:`coc.doctor.check` reads.
PREFIX = "coc-doctor "
#: ``HOST=SECONDS[,HOST=SECONDS...]``: seconds added to those hosts' clocks. Only for tests:
#: a clock skew cannot be made on one machine (all namespaces share the clock), so a test
#: fakes one through this variable.
CLOCK_OFFSET = "COC_DOCTOR_CLOCK_OFFSET"
_PINGS, _BULK = 20, 1 << 20


def say(kind: str, **fields: Any) -> None:
    """Print one result line for coc doctor."""
    print(PREFIX + json.dumps({"kind": kind, **fields}), flush=True)


def present_addresses() -> set[str] | None:
    """Return the IP addresses on this host's interfaces (None when ``ip`` cannot tell)."""
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {line.split()[3].split("/")[0] for line in out.splitlines() if len(line.split()) > 3}


def declared_interfaces(host: str) -> list[tuple[str, str | None, str | None]]:
    """Return ``[(network, interface name, address)]`` the topology gives ``host``."""
    from coc import topology
    from coc.errors import TopologyWarning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = topology.load(os.environ["COC_TOPOLOGY"])
    return [(net, d.get("name"), d.get("address")) for net, d in G[host].items()
            if d.get("kind") == "interface"]


def report_host() -> None:
    """Say what this host has: Python, coc, and the declared interfaces found or missing."""
    import coc

    host = os.environ.get("COC_HOST", "")
    # engines on loopback (the embedded default: every site on this machine) use none of the
    # declared addresses, so there is nothing to check
    local = os.environ.get("COC_LISTEN_HOST", "127.0.0.1").startswith("127.")
    present = None if local else present_addresses()
    interfaces = [{"network": net, "name": name, "address": address,
                   "present": None if present is None or address is None
                   else address in present}
                  for net, name, address in declared_interfaces(host)]
    say("host", host=host, site=os.environ.get("COC_SITE"), python=sys.executable,
        python_version=sys.version.split()[0], coc=coc.__version__, interfaces=interfaces)


def _serve(comm: Communicator, clock: Clock) -> None:
    """Every rank but 0: answer rank 0's probes until it says done."""
    buf = bytearray(_BULK)
    while (order := comm.recv(source=0, tag=1)) != "done":
        if order == "clock":
            comm.send(clock(), 0, tag=2)
        elif order == "ping":
            for _ in range(_PINGS):
                comm.Recv(memoryview(buf)[:8], source=0, tag=3)
                comm.Send(memoryview(buf)[:8], 0, tag=3)
        elif order == "bulk":
            comm.Recv(buf, source=0, tag=4)
            comm.Send(memoryview(buf)[:1], 0, tag=4)


def _probe(comm: Communicator, peer: int, clock: Clock) -> dict[str, float]:
    """Rank 0: measure clock offset, latency and bandwidth toward ``peer``."""
    best: tuple[float, float] | None = None
    for _ in range(5):
        t0 = time.time()
        comm.send("clock", peer, tag=1)
        theirs = comm.recv(source=peer, tag=2)
        t3 = time.time()
        if best is None or t3 - t0 < best[1]:
            best = (theirs - (t0 + t3) / 2 - (clock() - time.time()), t3 - t0)
    small, halves = bytearray(8), []
    comm.send("ping", peer, tag=1)
    for _ in range(_PINGS):
        t0 = time.perf_counter()
        comm.Send(small, peer, tag=3)
        comm.Recv(small, source=peer, tag=3)
        halves.append((time.perf_counter() - t0) / 2)
    bulk = bytearray(_BULK)
    comm.send("bulk", peer, tag=1)
    t0 = time.perf_counter()
    comm.Send(bulk, peer, tag=4)
    comm.Recv(memoryview(bulk)[:1], source=peer, tag=4)
    elapsed = max(time.perf_counter() - t0 - 2 * statistics.median(halves), 1e-9)
    assert best is not None        # five clock exchanges ran
    return {"offset": best[0], "latency": statistics.median(halves),
            "bandwidth": _BULK / elapsed}


def main() -> None:
    """Report the host, join the job, and (rank 0) probe every other rank."""
    report_host()
    import coc

    given = dict(item.split("=", 1) for item in
                 (os.environ.get(CLOCK_OFFSET) or "").split(",") if "=" in item)
    offset = float(given.get(os.environ.get("COC_HOST", ""), 0))

    def clock() -> float:
        return time.time() + offset

    comm = coc.init()
    hosts = comm.allgather(os.environ.get("COC_HOST"))
    if comm.rank == 0:
        for peer in range(1, comm.size):
            say("probe", source=hosts[0], host=hosts[peer], **_probe(comm, peer, clock))
        for peer in range(1, comm.size):
            comm.send("done", peer, tag=1)
    else:
        _serve(comm, clock)
    comm.barrier()


if __name__ == "__main__":
    main()
