"""``coc doctor TOPOLOGY``: the command line of :mod:`coc.doctor.check`."""

from __future__ import annotations

import argparse

from coc.doctor.check import diagnose, format_table

__all__ = ["register"]


def _doctor(args: argparse.Namespace) -> int:
    options: list[str] = []
    if args.testbed:
        options += ["--testbed", args.testbed]
    for flag, values in (("--profile", args.profile), ("--port-range", args.port_range),
                         ("--spawner", args.spawner)):
        for value in values:
            options += [flag, value]
    rows = diagnose(args.topology, options, timeout=args.timeout)
    print(format_table(rows), end="")
    return 1 if any(r.status == "problem" for r in rows) else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``coc doctor`` to the ``coc`` command's sub-parsers."""
    p = sub.add_parser("doctor", help="check a topology against the real machines before a "
                                      "job: sites, Pythons, interfaces, links, clocks, speeds")
    p.add_argument("topology", metavar="TOPOLOGY", help="topology file or library name")
    p.add_argument("--testbed", metavar="NAME", help="the sites run in testbed NAME")
    p.add_argument("--profile", action="append", default=[], metavar="FILE|NAME",
                   help="site profiles, as for coc-run (repeatable)")
    p.add_argument("--port-range", action="append", default=[], metavar="[SITE=]LOW-HIGH",
                   help="as for coc-run (repeatable)")
    p.add_argument("--spawner", action="append", default=[], metavar="SITE=KIND",
                   help="as for coc-run (repeatable)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="give up on the probe job after SECONDS (default 120)")
    p.set_defaults(func=_doctor)
