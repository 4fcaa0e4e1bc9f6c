"""``coc testbed up|down|status|exec``: build a topology as network namespaces and use it."""

from __future__ import annotations

import argparse
import datetime
import warnings
from collections.abc import Sequence

from coc.testbed import testbed as tb
from coc.errors import TestbedError, TopologyWarning

__all__ = ["register", "describe"]


def _bandwidth(value: float | None) -> str:
    from coc.topology.units import format_bandwidth

    return "-" if not value else format_bandwidth(value)


def _latency(value: float | None) -> str:
    from coc.topology.units import format_time

    return "-" if value is None else format_time(value)


def _table(rows: Sequence[Sequence[object]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def describe(bed: tb.Testbed) -> str:
    """Return the text ``coc testbed status`` prints for the :class:`Testbed` ``bed``."""
    s = bed.state
    built = datetime.datetime.fromtimestamp(s["created"], datetime.timezone.utc)
    scale = f", scaled to {s['scale']} hosts per site/switch" if s.get("scale") else ""
    lines = [f"testbed {bed.name}: topology {s['topology']}{scale}; {len(s['hosts'])} hosts, "
             f"{len(s['networks'])} networks, {len(s['links'])} links",
             f"  built {built:%Y-%m-%d %H:%M:%S} UTC in {s.get('up_seconds', 0):.2f} s; "
             f"phase {s['phase']}; namespaces {s['infra']}<host>, bridges in {s['infra']}"]
    missing = bed.missing()
    if missing:
        lines.append(f"  STALE: {len(missing)} namespaces are gone ({', '.join(missing[:5])}"
                     f"{', ...' if len(missing) > 5 else ''}); `coc testbed down --name "
                     f"{bed.name}` cleans up")
    offered = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in s["offered"].items())
    lines.append(f"  kernel qdiscs: {offered}")
    for prop, (emulated, how) in bed.emulation().items():
        lines.append(f"  {prop}: {'emulated' if emulated else 'NOT EMULATED'} - {how}")
    rows: list[tuple[str, ...]] = [("host", "site", "role", "interfaces")]
    for host, h in s["hosts"].items():
        ifs = ", ".join(f"{i['dev']} {i['address']}/{i['prefixlen']} ({i['network']})"
                        for i in h["interfaces"])
        if h["routes"]:  # subnets of linked networks, reached directly
            ifs += "; on-link " + ", ".join(f"{r['subnet']} dev {r['dev']}" for r in h["routes"])
        rows.append((host, h["site"] or "-", h["role"], ifs))
    lines += ["", *_table(rows), ""]
    rows = [("network", "bridge", "subnet", "bandwidth", "latency")]
    for net, n in s["networks"].items():
        subnet = (n["subnet"] or "-") + (" (picked by the testbed)" if n["assigned"] else "")
        rows.append((net, n["bridge"], subnet, _bandwidth(n["bandwidth"]),
                     _latency(n["latency"])))
    for link in s["links"]:
        rows.append((" <-> ".join(link["between"]), "link", "-", _bandwidth(link["bandwidth"]),
                     _latency(link["latency"])))
    lines += _table(rows)
    return "\n".join(lines)


def _up(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:   # one line each, as coc-run says them
        warnings.simplefilter("always", TopologyWarning)
        bed = tb.up(args.topology, name=args.name, scale=args.scale)
    for warning in dict.fromkeys(str(w.message) for w in caught):
        print(f"topology warning: {warning}")
    s = bed.state
    stale = s["stale_removed"]
    if stale["namespaces"]:
        print(f"removed a stale testbed {bed.name!r} first ({stale['namespaces']} namespaces, "
              f"{stale['processes']} processes)")
    print(f"testbed {bed.name} up in {s['up_seconds']:.2f} s: {len(s['hosts'])} hosts, "
          f"{len(s['networks'])} networks, {len(s['links'])} links")
    for prop, (emulated, how) in bed.emulation().items():
        if not emulated:
            print(f"  {prop}: NOT EMULATED - {how}")
    print(f"run commands with `coc testbed exec --name {bed.name} HOST -- CMD`; "
          f"remove with `coc testbed down --name {bed.name}`")
    return 0


def _down(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else tb.testbeds()
    if args.name is None and len(names) > 1 and not args.all:
        raise TestbedError(f"several testbeds are up ({', '.join(names)}): name one with "
                           "--name or pass --all")
    if not names:
        print("no testbed is up")
    for name in names:
        done = tb.down(name)
        print(f"testbed {name} down in {done['seconds']:.2f} s: removed {done['namespaces']} "
              f"namespaces, ended {done['processes']} processes")
    return 0


def _status(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else tb.testbeds()
    if not names:
        print("no testbed is up")
        return 0
    print("\n\n".join(describe(tb.attach(name)) for name in names))
    return 0


def _exec(args: argparse.Namespace) -> int:
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        raise TestbedError("no command given: coc testbed exec HOST -- CMD ...")
    return tb.attach(args.name).exec(args.host, command).returncode


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``coc testbed`` and its sub-commands to the ``coc`` parser."""
    p = subparsers.add_parser(
        "testbed", help="build a topology as network namespaces on this machine (root)",
        description="Build a topology as real network namespaces: one per host, a bridge per "
                    "network, shaped veths, no IP forwarding. Needs root. See docs/testbed.md.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="build a testbed (removing a stale one of that name first)")
    up.add_argument("topology", metavar="FILE|NAME", help="a topology file or library name")
    up.add_argument("--name", help="testbed name (default: the topology's name)")
    up.add_argument("--scale", type=int, metavar="K",
                    help="keep at most K compute hosts per site and switch")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="remove a testbed and everything it made")
    down.add_argument("--name", help="testbed name (default: the only one up)")
    down.add_argument("--all", action="store_true", help="remove every testbed that is up")
    down.set_defaults(func=_down)
    status = sub.add_parser("status", help="show hosts, addresses and what is emulated")
    status.add_argument("--name", help="testbed name (default: every testbed up)")
    status.set_defaults(func=_status)
    ex = sub.add_parser("exec", help="run a command in a host's namespace",
                        usage="coc testbed exec [--name N] HOST -- CMD ...")
    ex.add_argument("--name", help="testbed name (default: the only one up)")
    ex.add_argument("host")
    ex.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD")
    ex.set_defaults(func=_exec)
