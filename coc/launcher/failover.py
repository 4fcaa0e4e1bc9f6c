"""What the loss of a gateway daemon means for a job: a failover, or the end.

The engines route around a lost gateway by themselves when its gateway set has another
member (docs/wire-protocol.md "Failover"); the launcher only has to decide whether the job
can go on and say so on stderr. A gateway host is in the set of an ordered pair of sites
(``coc.topology.gateway_sets``); the job goes on when every set holding the lost gateway
still has a member whose daemon runs. Otherwise the gateway was the only one between two
sites, and the ranks on either side can no longer reach each other.
"""

import re
from functools import lru_cache

from coc.topology import gateway_sets

__all__ = ["GatewayLoss", "gateway_loss", "is_failover_line", "failover_report"]

#: What an engine logs when it moves routes off a lost gateway (native/src/reliable.c).
_FAILOVER_RE = re.compile(r"gateway (\d+) lost \((.*)\): (\d+) destinations? moved")


class GatewayLoss:
    """The verdict on one lost gateway: ``fatal`` and the ``lines`` coc-run prints."""

    def __init__(self, fatal, lines):
        self.fatal, self.lines = fatal, lines


@lru_cache(maxsize=8)
def _sets(G):
    return gateway_sets(G)


def _rank_span(plan, site):
    """Return "ranks 0-3" for the ranks of ``site`` (a list where they are not contiguous)."""
    ranks = [p.rank for p in plan.placements if p.site == site]
    if not ranks:
        return "no ranks"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ",".join(map(str, ranks))


def gateway_loss(plan, endpoint, words, running):
    """Judge the loss of gateway daemon ``endpoint``.

    Parameters
    ----------
    plan : coc.launcher.plan.Plan
    endpoint : int
        The lost daemon's endpoint id.
    words : str
        How it ended ("was killed by signal 9 (SIGKILL)").
    running : set
        Endpoint ids of gateway daemons still running.

    Returns
    -------
    GatewayLoss
        Not fatal: one line per pair of sites whose traffic moves ("site a: gateway ga1
        lost (was killed by signal 9 (SIGKILL)); traffic a<->b moves to ga2"). Fatal: the
        pairs it was the only gateway of, with the ranks on each side.
    """
    lost = plan.gateway(endpoint)
    alive = {g.host for g in plan.gateways if g.endpoint in running and g.endpoint != endpoint}
    used = set(plan.sites)
    moves, stranded = {}, []
    for (a, b), members in _sets(plan.topology).items():
        hosts = [h for h, _ in members]
        if lost.host not in hosts or a not in used or b not in used:
            continue
        pair = tuple(sorted((a, b)))
        survivors = [h for h in hosts if h != lost.host and h in alive]
        if survivors:
            moves.setdefault(pair, []).extend(h for h in survivors if h not in moves.get(pair, ()))
        elif pair not in stranded:
            stranded.append(pair)
    if stranded:
        pairs = "; ".join(f"{_rank_span(plan, a)} (site {a}) and {_rank_span(plan, b)} "
                          f"(site {b}) cannot reach each other" for a, b in stranded)
        between = ", ".join(f"{a} and {b}" for a, b in stranded)
        return GatewayLoss(True, [
            f"coc-run: gateway {lost.host} (site {lost.site}, endpoint {endpoint}) {words}: it "
            f"was the only gateway between sites {between}; {pairs}; job stopped"])
    return GatewayLoss(False, [
        f"coc-run: site {lost.site}: gateway {lost.host} lost ({words}); traffic {a}<->{b} "
        f"moves to {', '.join(hosts)}" for (a, b), hosts in moves.items()] or [
        f"coc-run: site {lost.site}: gateway {lost.host} lost ({words}); no traffic of this "
        f"job needed it"])


def is_failover_line(line):
    """Return True when a daemon's log line says its engine routed around a lost gateway."""
    return _FAILOVER_RE.search(line) is not None


def failover_report(plan, reporter, line):
    """Turn gateway daemon ``reporter``'s failover log line into coc-run's stderr line.

    A gateway that stops (SIGSTOP) or loses its link does not exit: its peers notice (the
    liveness timeout) and route around it; this names both by host and site.

    Examples: "coc-run: site b: gateway a-gw1 (site a) lost (silent past the liveness
    timeout), seen by gateway b-gw1; its traffic moves to the other gateways".
    """
    found = _FAILOVER_RE.search(line)
    seen = plan.gateway(reporter)
    lost_id, why = int(found.group(1)), found.group(2)
    lost = (plan.gateway(lost_id) if plan.size <= lost_id < plan.size + len(plan.gateways)
            else None)
    name = f"gateway {lost.host} (site {lost.site})" if lost else f"endpoint {lost_id}"
    return (f"coc-run: site {seen.site}: {name} lost ({why}), seen by gateway {seen.host}; its "
            f"traffic moves to the other gateways")
