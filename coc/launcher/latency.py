"""Latency emulation: which hops of a job get a user-space delay, and how long.

The testbed cannot add latency in the kernel (no netem), so the engine holds every frame to
a peer for a set time (``Engine.set_peer_delay``; the gateway daemon's ``delays`` key). A
network or link is *emulated* when

- ``coc-run --delay NETWORK=TIME`` names it (``TIME`` replaces its declared latency, in the
  model's prediction too; ``0`` turns it off), or
- the job runs under ``--testbed`` and its declared latency is at least
  :data:`EMULATE_FROM`: below that, the testbed's own latency (veths, bridges and the
  engines' wake-ups: tens of microseconds) already stands in for it, and a delay on top
  would count it twice.

An emulated network adds its full declared latency; the real latency of the testbed is not
subtracted (it is small against what is emulated and varies with load; docs/launcher.md,
"Latency"). A hop's delay is the sum over the emulated networks and links it crosses.

The delays reach engines as ``delays`` documents (:func:`coc.routes.delay_table`).
"""

import copy

from coc.errors import LaunchError
from coc.topology.routing import Direct
from coc.topology.units import format_time, parse_time

__all__ = ["EMULATE_FROM", "parse_delays", "override", "Emulation"]

#: Declared latencies from this one up are emulated under ``--testbed`` (100 us).
EMULATE_FROM = 100e-6


def parse_delays(pairs):
    """Return ``{network: seconds}`` from ``--delay NETWORK=TIME`` values.

    Examples
    --------
    >>> parse_delays(["wan=10ms", "lan=0"])
    {'wan': 0.01, 'lan': 0.0}
    """
    delays = {}
    for text in pairs:
        network, sep, time = text.partition("=")
        if not sep or not network:
            raise LaunchError(f"--delay {text}: expected NETWORK=TIME, e.g. wan=10ms")
        try:
            delays[network] = 0.0 if time.strip() == "0" else parse_time(time)
        except (ValueError, TypeError) as exc:
            raise LaunchError(f"--delay {text}: {exc}") from None
    return delays


def override(G, delays):
    """Return a copy of topology ``G`` whose networks in ``delays`` have that latency.

    The model then predicts with the latency the job emulates. Unknown networks are an error
    naming the networks the topology has.
    """
    networks = sorted(n for n, d in G.nodes(data=True) if d.get("kind") == "network")
    unknown = sorted(set(delays) - set(networks))
    if unknown:
        raise LaunchError(f"--delay: unknown network {', '.join(unknown)} (topology has: "
                          f"{', '.join(networks)})")
    if not delays:
        return G
    G = copy.deepcopy(G)
    for network, seconds in delays.items():
        G.nodes[network]["latency"] = seconds
    return G


class Emulation:
    """The delays a job's engines set: ``delay(host, peer host, network)`` in seconds.

    ``G`` is the topology with ``--delay`` overrides applied; ``overridden`` the networks
    they name; ``testbed`` whether the job runs under ``--testbed``.
    """

    def __init__(self, G, overridden=(), testbed=False):
        self.overridden, self.testbed = set(overridden), testbed
        emulated = copy.deepcopy(G)
        for n, d in emulated.nodes(data=True):
            if d.get("kind") == "network" and not self._emulates(n, d["latency"]):
                d["latency"] = 0.0
        for _, _, d in emulated.edges(data=True):
            if d.get("kind") == "link" and not self._emulates(None, d["latency"]):
                d["latency"] = 0.0
        self.networks = {n: d["latency"] for n, d in emulated.nodes(data=True)
                         if d.get("kind") == "network" and d["latency"] > 0}
        self._direct = Direct(emulated)

    def _emulates(self, network, latency):
        if network in self.overridden:
            return True
        return self.testbed and latency >= EMULATE_FROM

    def delay(self, host, network):
        """Return the delay of a hop from ``host`` onto ``network`` (0 when none is emulated)."""
        return self._direct.latency(host, network) or 0.0

    def describe(self):
        """Return one line per emulated network, for ``--dry-run``."""
        return [f"  {n}: {format_time(t)}" for n, t in sorted(self.networks.items())]
