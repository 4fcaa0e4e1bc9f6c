"""Build a testbed from its plan, and remove everything a testbed made, crashed or not."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Any, cast

import networkx as nx

from coc.testbed import firewall, names, netns, plan as planning, shaping, state
from coc.errors import TestbedError

__all__ = ["build", "destroy", "SYSCTLS"]

# Set in every namespace before any interface exists: no IP forwarding (so only coc's
# gateway processes join networks) and, unless the topology uses it, no IPv6 (whose router
# solicitations and duplicate-address probes would otherwise add noise to every link).
SYSCTLS = {
    "net.ipv4.ip_forward": "0",
    "net.ipv6.conf.all.forwarding": "0",
    "net.ipv6.conf.default.forwarding": "0",
}
_NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
_GRACE = 2.0  # seconds processes left in a testbed get between SIGTERM and SIGKILL


def _uses_ipv6(plan: planning.Plan) -> bool:
    return any(":" in (net["subnet"] or "") for net in plan["networks"].values())


def _check_isolation(plan: planning.Plan) -> None:
    """Read back ip_forward in every namespace and check no host has a default route."""
    for ns in planning.namespaces(plan):
        if netns.read_sysctl(ns, "net.ipv4.ip_forward") != "0":
            raise TestbedError(f"namespace {ns}: net.ipv4.ip_forward did not stay 0")
    for host, h in plan["hosts"].items():
        for row in netns.read(h["namespace"], "/proc/thread-self/net/route").splitlines()[1:]:
            iface, destination, _, _, _, _, _, mask, *_ = row.split()
            if destination == mask == "00000000":
                raise TestbedError(f"host {host!r} has a default route (via {iface})")


def _create(plan: planning.Plan) -> dict[str, bool]:
    """Create the namespaces, bridges, veths, addresses and qdiscs; return the qdisc kinds."""
    all_ns = planning.namespaces(plan)
    netns.add_namespaces(all_ns)
    sysctls = SYSCTLS if _uses_ipv6(plan) else {**SYSCTLS, **_NO_IPV6}
    for ns in all_ns:
        netns.write_sysctls(ns, sysctls)
    offered = shaping.detect(plan["infra"])
    netns.batch("ip", plan["infra"], planning.infra_commands(plan),
                what="building bridges and veths")
    for host, h in plan["hosts"].items():
        netns.batch("ip", h["namespace"], planning.host_commands(plan, host),
                    what=f"configuring host {host}")
    for ns, lines in planning.shaping_commands(plan, offered).items():
        netns.batch("tc", ns, lines, what="shaping links")
    _check_isolation(plan)
    for host, h in plan["hosts"].items():
        if h.get("outside"):
            firewall.block_inbound(h["namespace"], h["outside"])
    return offered


def build(G: nx.Graph, name: str) -> state.Record:
    """Build topology ``G`` as testbed ``name`` and return its recorded state.

    A testbed of that name left over from an earlier run (state file or namespaces) is
    removed first; if building fails half-way, what was made is removed again.
    """
    plan = planning.make_plan(G, name)
    with state.lock(name):
        stale = _clean(name)
        record: state.Record = {**plan, "phase": "building", "created": time.time(), "offered": {},
                  "scale": G.graph.get("scale"), "stale_removed": stale}
        state.save(record)
        start = time.monotonic()
        try:
            record["offered"] = _create(plan)
        except BaseException:
            _clean(name)
            raise
        record["phase"] = "up"
        record["up_seconds"] = time.monotonic() - start
        state.save(record)
    return record


def _end_processes(namespaces: Sequence[str]) -> int:
    """Terminate the processes still running in ``namespaces`` (TERM, then KILL); count them."""
    running = netns.pids(namespaces) - {os.getpid()}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in running:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + _GRACE
        left = running
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = netns.pids(namespaces) & running
        if not left:
            break
    return len(running)


def _clean(name: str) -> dict[str, int]:
    """Remove every namespace of testbed ``name`` (recorded or found by prefix) and its state."""
    record = state.load(name)
    present = netns.namespaces()
    # a record is its plan plus the phase and timings of building it
    recorded = planning.namespaces(cast(planning.Plan, record)) if record else []
    victims = [ns for ns in dict.fromkeys(names.owned(name, recorded)
                                          + names.owned(name, present)) if ns in present]
    ended = _end_processes(victims)
    netns.delete_namespaces(victims)
    left = names.owned(name, netns.namespaces())
    if left:
        raise TestbedError(f"testbed {name!r}: namespaces {', '.join(left)} could not be "
                           "removed")
    state.remove(name)
    return {"namespaces": len(victims), "processes": ended}


def destroy(name: str) -> dict[str, Any]:
    """Remove testbed ``name``: end its processes, delete its namespaces, forget its state.

    Deleting a namespace destroys the veths and bridges in it, so nothing is left in the root
    namespace. Idempotent: removing a testbed that is not there does nothing. Returns
    {"namespaces": count removed, "processes": count ended, "seconds": time taken}.
    """
    start = time.monotonic()
    with state.lock(name, drop=True):
        removed = _clean(name)
    return {**removed, "seconds": time.monotonic() - start}
