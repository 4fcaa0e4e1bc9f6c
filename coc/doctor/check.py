"""Run the doctor's probe as a job and turn what it finds into rows of a table.

The probe runs through ``coc-run`` itself (:mod:`coc.launcher.cli`) with one rank on every
host that can run ranks, so every site is reached the way a job reaches it: its spawner,
its profile, its Python, the testbed. What cannot even start is reported from
``coc-run``'s own error lines (a site unreachable, a Python without coc, a link that cannot
be made, which names the link and the fix). Gateway hosts run no probe: their interfaces
and ports are checked by the links their daemons make before any rank starts.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from coc import topology
from coc.doctor.probe import PREFIX
from coc.errors import TopologyWarning
from coc.pycommand import python_argv
from coc.topology.units import format_bandwidth, format_time

__all__ = ["Row", "diagnose", "format_table", "CLOCK_TOLERANCE"]

#: Clock offsets beyond this many seconds are reported (coc bench and logs need sync).
CLOCK_TOLERANCE = 0.05
#: A measured latency above ``declared * factor + slack`` (seconds) is reported.
LATENCY_FACTOR, LATENCY_SLACK = 3.0, 1e-3
#: A measured bandwidth below ``declared / factor`` is reported (short probes: generous).
BANDWIDTH_FACTOR = 10.0


@dataclass
class Row:
    """One line of the doctor's table: a check, where, its status and what to do."""

    check: str
    where: str
    status: str          # "ok", "warning" (a job runs) or "problem" (a job cannot run)
    detail: str
    fix: str = ""


def _probe_hosts(G: nx.Graph) -> dict[str, list[str]]:
    """Return ``{site: [host, ...]}``: the hosts of each site that can run a rank."""
    slots = topology.placement_slots(G)
    return {site: [h for h in topology.hosts(G, site=site) if h in slots]
            for site in topology.sites(G)}


def coc_run_argv(source: str, G: nx.Graph, options: Sequence[str]) -> list[str]:
    """Return the ``coc-run`` command that runs the probe on every rank host of ``G``."""
    argv = [*python_argv("coc.launcher.cli"), "--topology", str(source),
            "--watchdog", "0", *options]
    for site, hosts in _probe_hosts(G).items():
        if hosts:
            argv += ["--site", f"{site}={len(hosts)}"]
        argv += [item for h in hosts for item in ("--host", f"{h}:1")]
    return [*argv, "-m", "coc.doctor.probe"]


def run_probe(source: str, G: nx.Graph, options: Sequence[str], timeout: float
              ) -> tuple[int | None, list[dict[str, Any]], list[str]]:
    """Run the probe job; return ``(exit status, [result dicts], coc-run's stderr lines)``."""
    try:
        done = subprocess.run(coc_run_argv(source, G, options), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, _results(out), [f"the probe job did not end within {timeout:g} s"]
    return done.returncode, _results(done.stdout), done.stderr.splitlines()


def _results(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines()
            if line.startswith(PREFIX)]


def _failure_rows(status: int | None, errors: list[str]) -> list[Row]:
    """Rows for what coc-run said when the probe job failed."""
    rows = []
    lines = [line.removeprefix("coc-run: ").removeprefix("error: ") for line in errors
             if line.startswith("coc-run:") or "did not end" in line]
    for i, line in enumerate(lines):
        if line.startswith("the link "):
            fix = lines[i + 1] if i + 1 < len(lines) else ""
            rows.append(Row("link", line.split(" cannot be made")[0].removeprefix("the link "),
                            "problem", line, fix))
        elif "cannot import coc" in line or "imports coc" in line:
            rows.append(Row("python", line.split(":")[0], "problem", line))
        elif "site unreachable" in line or "its agent" in line:
            rows.append(Row("login", line.split(":")[0], "problem", line))
    if status != 0 and not rows:
        rows.append(Row("job", "coc-run", "problem", " / ".join(lines or errors[-3:])
                        or f"exit status {status}"))
    return rows


def _host_rows(hosts: Iterable[dict[str, Any]]) -> list[Row]:
    rows = []
    for info in hosts:
        where = f"host {info['host']}"
        rows.append(Row("python", where, "ok", f"{info['python']} (Python "
                        f"{info['python_version']}, coc {info['coc']})"))
        for i in info["interfaces"]:
            name = f"{i['network']} ({i['name']}, {i['address'] or 'no address declared'})"
            if i["present"] is False:
                rows.append(Row("interface", where, "problem",
                                f"declared interface on network {name} is missing",
                                f"bring up {i['address']} on {info['host']} or correct its "
                                "interface in the topology"))
            else:
                rows.append(Row("interface", where, "ok", f"{name} present" if i["present"]
                                else f"{name}: not checked"))
    return rows


def _judged(check: str, where: str, bad: bool, detail: str, fix: str) -> Row:
    """Return a row that is a warning with ``fix`` when ``bad``, else ok."""
    return Row(check, where, "warning" if bad else "ok", detail, fix if bad else "")


def _probe_rows(G: nx.Graph, probes: Iterable[dict[str, Any]]) -> list[Row]:
    rows = []
    for p in probes:
        where, skew = f"{p['source']} -> {p['host']}", p["offset"]
        declared = topology.route(G, p["source"], p["host"], 8).time
        bottleneck = min(topology_bandwidths(G, topology.route(G, p["source"], p["host"],
                                                               1 << 20)))
        rows += [
            _judged("clock", f"host {p['host']}", abs(skew) > CLOCK_TOLERANCE,
                    f"{skew:+.3f} s against {p['source']}", "synchronise the clocks (NTP, "
                    "chrony): timings and logs across hosts disagree"),
            _judged("latency", where, p["latency"] > declared * LATENCY_FACTOR + LATENCY_SLACK,
                    f"measured {format_time(p['latency'], 3)}, declared "
                    f"{format_time(declared, 3)}",
                    "correct the declared latency of the route's networks"),
            _judged("bandwidth", where, p["bandwidth"] < bottleneck / BANDWIDTH_FACTOR,
                    f"measured {format_bandwidth(p['bandwidth'], 3)}, declared "
                    f"{format_bandwidth(bottleneck, 3)}",
                    "correct the declared bandwidth (or look for a slow hop)")]
    return rows


def topology_bandwidths(G: nx.Graph, route: topology.Route) -> list[float]:
    """Return the bandwidths of the networks ``route`` crosses."""
    return [G.nodes[net]["bandwidth"] for hop in route.hops for net in hop.networks
            if net in G and G.nodes[net].get("kind") == "network"] or [float("inf")]


def diagnose(source: str, options: Iterable[str] = (), timeout: float = 120.0) -> list[Row]:
    """Check topology ``source`` (file or library name) against the machines; return rows.

    ``options`` are ``coc-run`` options that say how to reach the sites (``--testbed``,
    ``--profile``, ``--port-range``, ``--spawner``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = topology.load(source)
    status, results, errors = run_probe(source, G, list(options), timeout)
    order = {h: i for i, h in enumerate(topology.hosts(G))}
    hosts = sorted((r for r in results if r["kind"] == "host"), key=lambda r: order[r["host"]])
    reached = {h["site"] for h in hosts}
    rows = [Row("login", f"site {site}", "ok", "agent started, coc imported")
            for site in topology.sites(G) if site in reached]
    rows += _host_rows(hosts)
    rows += _failure_rows(status, errors)
    if status == 0 and len(reached) > 1:
        rows.append(Row("link", "every gateway link", "ok", "made (in the port ranges) before "
                        "the ranks started"))
    rows += _probe_rows(G, sorted((r for r in results if r["kind"] == "probe"),
                                  key=lambda r: order[r["host"]]))
    return rows


def format_table(rows: Iterable[Row]) -> str:
    """Return the rows as the table ``coc doctor`` prints, problems last with their fixes."""
    order = {"ok": 0, "warning": 1, "problem": 2}
    rows = sorted(rows, key=lambda r: order[r.status])
    widths = [max([len(h)] + [len(getattr(r, f)) for r in rows])
              for h, f in (("CHECK", "check"), ("WHERE", "where"), ("STATUS", "status"))]
    lines = [f"{'CHECK':<{widths[0]}}  {'WHERE':<{widths[1]}}  {'STATUS':<{widths[2]}}  DETAIL"]
    for r in rows:
        lines.append(f"{r.check:<{widths[0]}}  {r.where:<{widths[1]}}  {r.status:<{widths[2]}}  "
                     f"{r.detail}")
    todo = [r for r in rows if r.status != "ok" and r.fix]
    if todo:
        lines.append("")
        lines.append("what to do:")
        lines += [f"  {r.where}: {r.fix}" for r in todo]
    problems = sum(r.status == "problem" for r in rows)
    lines.append("")
    lines.append("a job can run" if not problems else
                 f"a job cannot run: {problems} problem{'s' if problems > 1 else ''}")
    return "\n".join(lines) + "\n"
