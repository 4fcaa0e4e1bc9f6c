"""PACX-MPI's shape on a testbed: a C ping-pong through two user-level relays, one per site.

PACX-MPI sends every message between sites through two daemons, one on each site's
gateway, that copy bytes between TCP connections. :func:`run_chain` builds that path in a
testbed's network namespaces from coc's minimal C programs (``native/tools``): the
ping-pong echo on the far host, a ``coc_relay`` on each relay host, the ping-pong client
on the near host; each process connects to the next one's address on the network the
experiment names, so the bytes cross the same shaped veths as coc's gateways do. A
wide-area latency is added by the relay that sends onto the wide-area network
(``coc_relay -d/-D``), in each direction, as coc's engines add it on their hop.
"""

import subprocess
from dataclasses import dataclass

from coc.bench import engine
from coc.errors import CocError

__all__ = ["Hop", "Chain", "run_chain"]


@dataclass(frozen=True)
class Hop:
    """One process of the chain: a host, and the network its predecessor reaches it on."""

    host: str
    network: str


@dataclass(frozen=True)
class Chain:
    """Client host, relay hops (in order) and the echo hop; ``wan`` is the index of the
    relay whose onward link is the wide-area one."""

    client: str
    relays: tuple
    echo: Hop
    wan: int = 0


def run_chain(bed, chain, specs, *, delay_us=0, prefix=(), timeout=engine.TIMEOUT):
    """Run the C ping-pong through ``chain`` on testbed ``bed``; return the tool's rows.

    ``specs`` is ``[[size, iterations], ...]``; rows are dicts with size, iters, median_ns
    and p99_ns of half round trips. ``delay_us`` is the one-way wide-area latency: relay
    ``chain.wan`` holds what it sends out over the wide-area link, and the relay after it
    what it sends back over that link (the last relay holds both directions itself, since
    the echo program adds no delay; a round trip gains twice ``delay_us`` either way).
    ``prefix`` goes before every command (``taskset -c 0`` to pin).
    """
    tools = engine.native_tools()
    procs = []

    def start(host, *args):
        procs.append(subprocess.Popen([*prefix, *bed.argv(host, [str(a) for a in args])],
                                      stdout=subprocess.PIPE, text=True))
        _, port = engine._line(procs[-1], timeout).split()
        return port

    try:
        port = start(chain.echo.host, tools["coc_pingpong"], "server",
                     bed.address(chain.echo.host, chain.echo.network), 0)
        target = (bed.address(chain.echo.host, chain.echo.network), port)
        # Start from the far end so that each relay knows where to connect.
        for i in reversed(range(len(chain.relays))):
            hop = chain.relays[i]
            delay = ()
            if delay_us and i == chain.wan:
                delay += ("-d", delay_us)
            if delay_us and i == min(chain.wan + 1, len(chain.relays) - 1):
                delay += ("-D", delay_us)
            port = start(hop.host, tools["coc_relay"], *delay,
                         bed.address(hop.host, hop.network), 0, *target)
            target = (bed.address(hop.host, hop.network), port)
        client = bed.argv(chain.client, [str(tools["coc_pingpong"]), "client", *target,
                                         *(f"{s}:{n}" for s, n in specs)])
        out = subprocess.run([*prefix, *client], capture_output=True, text=True,
                             timeout=timeout * len(specs))
    except subprocess.TimeoutExpired:
        raise CocError(f"the relay chain {chain.client} -> "
                       f"{' -> '.join(h.host for h in chain.relays)} -> {chain.echo.host} "
                       f"did not finish within {timeout * len(specs):.0f} s") from None
    finally:
        for p in reversed(procs):
            engine._reap(p)
    if out.returncode != 0:
        raise CocError(f"the relay chain's client on {chain.client} exited with "
                       f"{out.returncode}: {out.stderr.strip()[-500:]}")
    return [dict(zip(("size", "iters", "median_ns", "p99_ns"), map(int, line.split())))
            for line in out.stdout.splitlines()]
