"""The ``coc-run`` command: mpirun-familiar flags, a plan, then one asyncio run of the job."""

import argparse
import asyncio
import math
import os
import re
import secrets
import signal
import sys
import warnings
from pathlib import Path

from coc import topology
from coc.errors import CocError, LaunchError, TopologyWarning
from coc.launcher import batch, placement
from coc.launcher.control import HELLO_TIMEOUT, Job
from coc.launcher.environment import parse_exports, scheduler_allocation
from coc.launcher.latency import parse_delays
from coc.launcher.output import OutputSink
from coc.launcher.profiles import load_profile, merge_settings
from coc.launcher.watchdog import DEFAULT_SECONDS
from coc.launcher.wire import parse_markings
from coc.launcher.plan import format_plan, make_plan
from coc.mpi4py import hook
from coc.topology.hostlist import compress
from coc.ports import parse_port_range
from coc.pycommand import python_argv

__all__ = ["main", "build_parser", "split_command", "rank_command"]

_USAGE = "coc-run [options] (program.py | -m module | executable) [args ...]"

# (flags, argparse keywords); options that take a value are those without an ``action``.
_OPTIONS: list[tuple[tuple[str, ...], dict]] = [
    (("-n", "-np"), dict(type=int, metavar="N",
                         help="number of ranks (default: the --site total, or every slot)")),
    (("--topology",), dict(metavar="FILE|NAME",
                           help="topology file or library name (default: the --testbed's "
                                "topology, else two-sites)")),
    (("--site",), dict(action="append", default=[], metavar="SITE=N",
                       help="run N ranks on SITE (repeatable; ranks numbered in this order)")),
    (("--host",), dict(action="append", default=[], metavar="HOSTS[:SLOTS]",
                       help="use only these hosts (host list expression, repeatable)")),
    (("--hostfile",), dict(metavar="FILE", help="use only the hosts in FILE ('host slots=N')")),
    (("--oversubscribe",), dict(action="store_true", help="allow more ranks than slots")),
    (("-x",), dict(action="append", default=[], dest="export", metavar="VAR[=VALUE]",
                   help="export VAR to every rank (repeatable)")),
    (("--tag-output",), dict(action="store_true",
                             help="prefix every output line with [site/host/rank]")),
    (("--output-dir",), dict(metavar="DIR", help="write each rank's stdout/stderr to DIR")),
    (("--timeout",), dict(type=float, metavar="SECONDS",
                          help="stop the job after SECONDS and exit with 124")),
    (("--watchdog",), dict(type=float, default=DEFAULT_SECONDS, metavar="SECONDS",
                           help="report what every rank waits for when nothing moved for "
                                f"SECONDS while operations are pending (default "
                                f"{DEFAULT_SECONDS:g}; 0: off)")),
    (("--watchdog-abort",), dict(action="store_true",
                                 help="stop the job after the watchdog's report (exit 125)")),
    (("--spawner",), dict(action="append", default=[], metavar="SITE=KIND",
                          help="start SITE's agent with spawner KIND (default: the topology's, "
                               "else local)")),
    (("--profile",), dict(action="append", default=[], metavar="FILE|NAME",
                          help="site profiles: how to reach and submit to each site "
                               "(repeatable; later files win)")),
    (("--testbed",), dict(metavar="NAME", help="run every site in testbed NAME's network "
                                               "namespaces (spawner netns; coc testbed up)")),
    (("--delay",), dict(action="append", default=[], metavar="NETWORK=TIME",
                        help="emulate TIME of latency on NETWORK instead of its declared one "
                             "(engine delays; repeatable; e.g. wan=10ms, wan=0)")),
    (("--port-range",), dict(action="append", default=[], metavar="[SITE=]LOW-HIGH",
                             help="listening sockets on SITE (every site without SITE=) bind "
                                  "to a port in LOW-HIGH, over the topology's port_range "
                                  "(repeatable)")),
    (("--encrypt",), dict(action="append", default=[], metavar="[NETWORK=]on|off",
                          help="encrypt hops over NETWORK (every network between sites "
                               "without NETWORK=), over the topology's 'encrypt' "
                               "(repeatable)")),
    (("--compress",), dict(action="append", default=[], metavar="[NETWORK=]zstd|lz4|none",
                           help="compress hops over NETWORK (every network between sites "
                                "without NETWORK=) with that codec, over the topology's "
                                "'compress' (repeatable)")),
    (("--batch",), dict(action="store_true",
                        help="submit one batch job per site from launcher/ templates, wait "
                             "until all run, then run the job in them")),
    (("--mpi4py",), dict(action="store_true",
                         help="mpi4py compatibility mode: `import mpi4py` in the ranks gives "
                              "coc's mpi4py (docs/api.md)")),
    (("--dry-run",), dict(action="store_true",
                          help="print the plan (and with --batch the job scripts) and stop")),
]
_TAKES_VALUE = {flag for flags, kw in _OPTIONS if "action" not in kw or kw["action"] == "append"
                for flag in flags}
_PYTHON = re.compile(r"python[0-9.]*\Z")


def build_parser():
    """Return the parser of ``coc-run``'s own options (the program follows them)."""
    parser = argparse.ArgumentParser(
        prog="coc-run", usage=_USAGE,
        description="Run one program as a parallel job over the sites of a topology.",
        epilog="A Python program (program.py, -m module) runs under `python -m coc`, so an "
               "unhandled exception in one rank stops the whole job.")
    for flags, keywords in _OPTIONS:
        parser.add_argument(*flags, **keywords)
    return parser


def split_command(argv):
    """Split ``argv`` into coc-run's options and the program with its arguments.

    Examples
    --------
    >>> split_command(["-n", "2", "--tag-output", "-m", "pkg.mod", "-v"])
    (['-n', '2', '--tag-output'], ['-m', 'pkg.mod', '-v'])
    >>> split_command(["--site=a=1", "./prog", "-n", "3"])
    (['--site=a=1'], ['./prog', '-n', '3'])
    """
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return argv[:i], argv[i + 1:]
        if word == "-m" or not word.startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if word in _TAKES_VALUE else 1
    return argv, []


def rank_command(command, python=sys.executable):
    """Return the argv each rank runs: Python programs go through ``python -m coc``.

    A bare ``python``/``python3`` means the site's Python (``python``, which the plan turns
    into each site's ``python`` setting), not whatever ``PATH`` finds first there; a path
    to an interpreter is kept. Either runs through :func:`coc.pycommand.python_argv`, so
    the rank imports the installed coc whatever its working directory.

    Examples
    --------
    >>> rank_command(["hello.py", "-v"], python="py")[3:]
    ['coc', 'hello.py', '-v']
    >>> argv = rank_command(["python3", "-m", "pkg"], python="py")
    >>> argv[0], argv[3:]
    ('py', ['coc', '-m', 'pkg'])
    >>> rank_command(["/opt/py3.12/bin/python3", "app.py"], python="py")[0]
    '/opt/py3.12/bin/python3'
    >>> rank_command(["hostname"])
    ['hostname']
    """
    if command[0] == "-m" or command[0].endswith(".py"):
        return python_argv("coc", *command, python=python)
    if (_PYTHON.match(Path(command[0]).name) and len(command) > 1
            and (command[1] == "-m" or command[1].endswith(".py"))):
        chosen = command[0] if "/" in command[0] else python
        return python_argv("coc", *command[1:], python=chosen)
    return list(command)


def _pairs(items, option):
    """Return ``[(key, value), ...]`` from ``KEY=VALUE`` option values."""
    pairs = []
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key or not value:
            raise LaunchError(f"{option} {item!r}: expected {option[2:].upper()}=VALUE")
        pairs.append((key, value))
    return pairs


def _host_limits(args, G):
    """Return (limits, description) from --host, --hostfile or a scheduler allocation."""
    if args.host or args.hostfile:
        limits = placement.parse_host_items(args.host)
        if args.hostfile:
            try:
                text = Path(args.hostfile).read_text()
            except OSError as exc:
                raise LaunchError(f"--hostfile {args.hostfile}: {exc.strerror}") from None
            limits += placement.parse_hostfile(text, args.hostfile)
        given = [f"--host {h}" for h in args.host]
        given += [f"--hostfile {args.hostfile}"] if args.hostfile else []
        return limits, " ".join(given)
    allocation = scheduler_allocation()
    if allocation is None:
        return None, "topology"
    known = [(h, slots) for h, slots in allocation.hosts if h in G]
    where = f"{allocation.scheduler} job {allocation.job_id}"
    if not known:
        return None, f"topology ({where} names no host of it)"
    # the allocation limits its own sites; the job's other sites keep the topology's hosts
    inside = {G.nodes[h]["site"] for h, _ in known}
    others = [(h, None) for h in topology.placement_slots(G) if G.nodes[h]["site"] not in inside]
    rest = "; other sites from the topology" if others else ""
    return known + others, f"{where}: {compress([h for h, _ in known])}{rest}"


def testbed_topology(name):
    """Return the topology ``--testbed name`` implies: the one it was built from, else ``name``.

    Without a testbed the default is the built-in ``two-sites``. A testbed that is not up
    and names no topology is an error (``--dry-run`` plans a library name without it).
    """
    if name is None:
        return "two-sites"
    from coc.testbed import state
    record = state.load(name)
    if record is None:
        if name in topology.library_names() or Path(name).is_file():
            return name
        raise LaunchError(f"--testbed {name}: no testbed named {name!r} is up (build it "
                          f"with: coc testbed up TOPOLOGY --name {name})")
    if record.get("file") and Path(record["file"]).is_file():
        return record["file"]
    return record.get("topology") or name


def _exports(args):
    """Return the variables every rank gets from ``-x`` and ``--mpi4py``."""
    exports = parse_exports(args.export)
    if args.mpi4py:
        exports[hook.MODE_VARIABLE] = "1"
    return exports


def parse_port_ranges(items):
    """Return ``{site or None: (low, high)}`` from ``--port-range [SITE=]LOW-HIGH`` values.

    Examples
    --------
    >>> parse_port_ranges(["41000-41100", "b=50000-50010"])
    {None: (41000, 41100), 'b': (50000, 50010)}
    """
    ranges = {}
    for item in items:
        site, equals, text = item.rpartition("=")
        try:
            ranges[site if equals else None] = parse_port_range(text)
        except CocError as exc:
            raise LaunchError(f"--port-range {item}: {exc.message}") from None
    return ranges


def plan_job(args, command):
    """Return the :class:`~coc.launcher.plan.Plan` for parsed options and a program."""
    if not command or command == ["-m"]:
        raise LaunchError(f"no program given (usage: {_USAGE})")
    if args.n is not None and args.n < 1:
        raise LaunchError(f"-n {args.n}: need at least one rank")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise LaunchError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    if not (math.isfinite(args.watchdog) and args.watchdog >= 0):
        raise LaunchError(f"--watchdog {args.watchdog:g}: must be a finite number of seconds "
                          f"(0: off)")
    sites = []
    for site, count in _pairs(args.site, "--site"):
        if not count.isdigit():
            raise LaunchError(f"--site {site}={count}: the count must be a number")
        if int(count) < 1:
            raise LaunchError(f"--site {site}={count}: need at least one rank")
        sites.append((site, int(count)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TopologyWarning)
        G = topology.load(args.topology or testbed_topology(args.testbed))
    limits, hosts_from = _host_limits(args, G)
    layers = [load_profile(name) for name in args.profile]
    if args.testbed:
        chosen = merge_settings(*layers)
        layers.append({site: {"testbed": args.testbed,
                              "spawner": chosen.get(site, {}).get("spawner", "netns")}
                       for site in topology.sites(G)})
    plan = make_plan(G, rank_command(command), n=args.n, site_counts=sites, limits=limits,
                     hosts_from=hosts_from, oversubscribe=args.oversubscribe,
                     spawners=dict(_pairs(args.spawner, "--spawner")),
                     exports=_exports(args), settings=merge_settings(*layers),
                     delays=parse_delays(args.delay), testbed=bool(args.testbed),
                     port_ranges=parse_port_ranges(args.port_range),
                     markings=parse_markings(args.encrypt, args.compress))
    plan.warnings = list(dict.fromkeys([str(w.message) for w in caught
                                        if issubclass(w.category, TopologyWarning)]
                                       + plan.warnings))
    return plan


async def run(plan, args):
    """Run ``plan`` and return coc-run's exit status."""
    sources = {("rank", p.rank): (f"{p.site}/{p.host}/{p.rank}", f"rank.{p.rank}")
               for p in plan.placements}
    gateways = {("gateway", g.endpoint): (f"{g.site}/{g.host}/gateway", f"gateway.{g.host}")
                for g in plan.gateways}
    try:
        sink = OutputSink({**sources, **gateways}, tag=args.tag_output,
                          output_dir=args.output_dir, files_only=gateways)
    except OSError as exc:
        raise LaunchError(f"--output-dir {args.output_dir}: {exc.strerror}: "
                          f"{exc.filename}") from None
    job = Job(plan, sink, secrets.token_bytes(32),
              hello_timeout=None if args.batch else HELLO_TIMEOUT,   # batch jobs queue
              watchdog=args.watchdog, watchdog_abort=args.watchdog_abort)
    return await job.run(timeout=args.timeout)


def main(argv=None):
    """Run ``coc-run`` with ``argv`` (default ``sys.argv[1:]``) and return its exit status."""
    options, command = split_command(sys.argv[1:] if argv is None else list(argv))
    args = build_parser().parse_args(options)
    try:
        plan = plan_job(args, command)
        if args.batch:
            if not batch.batch_sites(plan):
                raise LaunchError("--batch: no site names a scheduler (set 'scheduler:' in "
                                  "its profile, --profile)")
            batch.use_batch(plan)
        if args.dry_run:
            print(format_plan(plan), end="")
            if args.batch:
                print(batch.format_scripts(plan), end="")
            return 0
        return asyncio.run(run(plan, args))
    except CocError as exc:
        print(f"coc-run: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:                  # Ctrl-C before the job's handlers were set
        return 128 + signal.SIGINT
    except BrokenPipeError:                    # coc-run ... | head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
