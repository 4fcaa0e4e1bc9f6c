"""``coc bench reproduce NAME``: a paper's headline experiment rerun on its topology's testbed.

Each experiment builds the testbed of the paper's machine (``coc testbed``: namespaces,
shaped links), runs in one go coc, PACX-MPI's two-relay chain and — where the network is
flat — plain MPICH over the same veths (:mod:`coc.bench.paths`), and writes into ``--out``
``results.json``, ``report.md`` (tables, ratios, the command) and PNG plots (into ``--img``
when given). ``docs/reproductions.md`` holds the figures and compares them with the papers:

- ``seed000`` (Chemnitz, MPICH/Madeleine vs PACX-MPI): PingPong latency and bandwidth between
  the two sub-clusters, as the paper's figures 6–8;
- ``seed001`` (MPICH-GP): 128-byte ping-pong between two private-address clusters;
- ``seed003`` (Bunyip and Perseus, MPIBench): distributions of ping-pong, barrier and
  all-to-all times, scaled to this machine (``--scale``);
- ``seed004`` (UF meta-cluster, PACX-MPI): ping-pong latency as injected WAN latency grows.

The papers' applications run through :data:`APPLICATIONS` — example programs started under
``coc-run`` on the same testbed (``--examples``; listed as pending when missing).
"""

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from coc.bench import plots, report
from coc.bench.chain import Chain, Hop
from coc.bench.cli import add_pattern
from coc.bench.paths import (bench_run, chain_pingpong, coc_job, mpich_job, pingpong_run,
                             summary)
from coc.bench.repro_figures import (cell, pingpong_table, plot_distributions, plot_pingpong,
                                     plot_sweep, ratio, us)
from coc.errors import CocError
from coc.pycommand import python_argv

__all__ = ["EXPERIMENTS", "APPLICATIONS", "Experiment", "interleave", "run_applications",
           "reproduce", "register"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ATHLONS = [f"athlon{i}" for i in range(1, 9)]
XEONS = [f"xeon{i}" for i in range(1, 9)]
PRIVATE = [f"c1n{i}" for i in range(1, 5)] + [f"c2n{i}" for i in range(1, 5)]

#: The papers' applications, by experiment: (program in examples/, hosts (one rank each),
#: argument sets: quick, full). Each program checks its own answer and writes
#: ``{time, comm_time, verified, params}`` to ``--json``; one missing from examples/ is
#: reported as pending.
APPLICATIONS = {
    "seed000": [("hpl.py", ATHLONS + XEONS, [[]], [["--n", "1024", "--nb", "64"]]),
                ("render.py", ATHLONS + XEONS, [[]], [["--width", "640", "--height", "480"]])],
    "seed001": [("isort.py", PRIVATE, [["--class", "S"]],
                 [["--class", "S"], ["--class", "W"], ["--class", "A"]])],
    "seed004": [("md.py", ["zeta01", "acis01"], [[]], [[]])],
}


@dataclass
class Context:
    """What every experiment needs: where to write, how big, and the command to show."""

    out: Path
    img: Path
    quick: bool
    scale: int | None
    command: str
    pin: bool = False
    examples: Path = EXAMPLES
    testbeds: list = field(default_factory=list)

    def title(self, text):
        """Return a plot title, saying when every process was pinned to one CPU."""
        return f"{text}{' — all pinned to CPU 0' if self.pin else ''}"

    def testbed(self, topology, scale=None):
        """Build ``topology``'s testbed under a name unique to this run (down on exit)."""
        import coc.testbed
        self.testbeds.append(f"repro-{topology}-{os.getpid()}")
        return coc.testbed.up(topology, name=self.testbeds[-1], scale=scale)


@dataclass(frozen=True)
class Experiment:
    """One reproduction: its name, the paper, the topology and the function that runs it."""

    name: str
    title: str
    paper: str
    topology: str
    run: object


def interleave(bed):
    """Return ``bed``'s compute hosts ordered round-robin over groups sharing the same networks.

    The first two ranks then sit in different groups (sub-clusters, switches), so the
    first pair a benchmark measures crosses the machine.
    """
    groups = {}
    for host in bed.hosts:
        h = bed.state["hosts"][host]
        if h["role"] == "compute":
            key = tuple(sorted(i["network"] for i in h["interfaces"]))
            groups.setdefault(key, []).append(host)
    columns = list(groups.values())
    return [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]


def run_applications(ctx, bed, name, delays=()):
    """Run the papers' applications of experiment ``name`` on ``bed``; return their rows."""
    rows = []
    for app, hosts, quick_args, full_args in APPLICATIONS.get(name, []):
        path = ctx.examples / app
        if not path.is_file():
            rows.append({"app": app, "status": f"pending (no {path})"})
            continue
        for args in quick_args if ctx.quick else full_args:
            report_file = ctx.out / f"{app.removesuffix('.py')}-{len(rows)}.json"
            argv = [*python_argv("coc.launcher.cli"), "--testbed", bed.name,
                    *(a for h in hosts for a in ("--host", f"{h}:1")), "-n", str(len(hosts)),
                    *(a for d in delays for a in ("--delay", d)), sys.executable, str(path),
                    *args, "--json", str(report_file)]
            print(f"== {app} {' '.join(args)} on {bed.name}: {len(hosts)} ranks",
                  file=sys.stderr, flush=True)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
            row = {"app": app, "args": " ".join(args), "ranks": len(hosts),
                   "delays": list(delays),
                   "status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}"}
            if proc.returncode == 0 and report_file.is_file():
                result = json.loads(report_file.read_text())
                row.update({k: result.get(k) for k in ("time", "comm_time", "verified")})
            else:
                row["stderr"] = proc.stderr[-1500:]
            rows.append(row)
    return rows


def _load(topology):
    """Load a library topology without its warnings (single gateways are the point here)."""
    import warnings

    from coc import topology as topo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return topo.load(topology)


def _model(topology, src, dst, sizes):
    """Return ``[(size, µs)]``: coc's model of one message on the real machine."""
    from coc.topology.routing import message_time
    G = _load(topology)
    return [(s, message_time(G, src, dst, s) * 1e6) for s in sizes]


def _latency_us(topology, network):
    """Return a network's declared latency in whole µs: what the relay chain holds a chunk."""
    return round(_load(topology).nodes[network]["latency"] * 1e6)


# ---- the experiments ----------------------------------------------------------------------

P2P_SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20]

CHEMNITZ_CHAIN = Chain("athlon1", (Hop("athlon8", "myrinet"), Hop("xeon7", "xeon-gbe")),
                       Hop("xeon1", "xeon-sci"))
PRIVATE_PAIR_CHAIN = Chain("c1n1", (Hop("fe1", "lan1"), Hop("fe2", "internet")),
                           Hop("c2n1", "lan2"))
UF_CHAIN = Chain("zeta01", (Hop("russell", "zeta-lan"), Hop("russell", "russell-uplink")),
                 Hop("acis01", "acis-lan"), wan=1)

COC, CHAIN, MPICH = "coc", "2 relays", "MPICH"


def seed000(ctx):
    """PingPong between the Athlon and Xeon sub-clusters: coc, two relays, MPICH over FE."""
    sizes = [8, 4096, 262144] if ctx.quick else P2P_SIZES
    with ctx.testbed("chemnitz-2003") as bed:
        series = {
            COC: coc_job(bed, ["athlon1", "xeon1"],
                         pingpong_run(sizes, ctx.out / "coc.json", quick=ctx.quick),
                         pin=ctx.pin),
            CHAIN: chain_pingpong(bed, CHEMNITZ_CHAIN, sizes, quick=ctx.quick, pin=ctx.pin),
            MPICH: mpich_job(bed, [("athlon", "athlon1", ["athlon-fe"]),
                                   ("xeon", "xeon1", ["xeon-gbe"])],
                             pingpong_run(sizes, ctx.out / "mpich.json", quick=ctx.quick),
                             pin=ctx.pin),
        }
        apps = run_applications(ctx, bed, "seed000")
    img = plot_pingpong(series, ctx.img / "repro-seed000-pingpong.png",
                        ctx.title("Chemnitz: PingPong athlon1 ↔ xeon1 (median, p10–p90 band)"),
                        _model("chemnitz-2003", "athlon1", "xeon1", sizes))
    lines = ["PingPong athlon1 ↔ xeon1, half round trip: median (p10–p90; the relays' C tool "
             "gives p99)", "", *pingpong_table(series, sizes, COC), "",
             "Paths: coc — Myrinet → gateway xeon8 → Xeon SCI (the model's route); "
             "2 relays — Myrinet → relay on athlon8 → Fast Ethernet → relay on xeon7 → "
             "Xeon SCI (PACX-MPI with FE between its daemons); MPICH — TCP over Fast "
             "Ethernet (athlon-fe ↔ xeon-gbe), no shared memory."]
    return {"series": series, "applications": apps, "images": [img], "lines": lines}


def seed001(ctx):
    """128-byte ping-pong between two private clusters: coc's gateways against two relays."""
    sizes = [128] if ctx.quick else [128, 1024, 8192, 65536]
    with ctx.testbed("private-pair") as bed:
        series = {
            COC: coc_job(bed, ["c1n1", "c2n1"],
                         pingpong_run(sizes, ctx.out / "coc.json", quick=ctx.quick),
                         pin=ctx.pin),
            CHAIN: chain_pingpong(bed, PRIVATE_PAIR_CHAIN, sizes, quick=ctx.quick,
                                  delay_us=_latency_us("private-pair", "internet"),
                                  pin=ctx.pin),
        }
        apps = run_applications(ctx, bed, "seed001")
    img = plot_pingpong(series, ctx.img / "repro-seed001-pingpong.png",
                        ctx.title("Private pair: ping-pong c1n1 ↔ c2n1 across fe1, fe2 "
                                  "(internet 1.8 ms emulated)"),
                        _model("private-pair", "c1n1", "c2n1", sizes))
    paper = {128: ("1923 µs (NAT + 1 proxy)", "2756 µs (2 proxies)")}
    lines = ["Ping-pong c1n1 ↔ c2n1, half round trip: median (p10–p90; p99 for the relays)",
             "", *pingpong_table(series, sizes, COC), "",
             f"Paper (128 B): {paper[128][0]} against {paper[128][1]}; coc's model of the "
             f"real machine: {_model('private-pair', 'c1n1', 'c2n1', [128])[0][1]:.0f} µs.",
             "", "Both paths cross the same two front-ends; the emulated 1.8 ms of the "
             "internet is added by coc's engines (coc-run under --testbed) and by the relay "
             "on each side that sends onto the internet (coc_relay -d/-D)."]
    return {"series": series, "applications": apps, "images": [img], "lines": lines}


def distribution_panels(runs, sizes):
    """Return ``{operation: {path: row}}`` of seed003's runs (``{path: coc bench run results}``)."""
    panels = {}
    for pattern, what, psizes in (("PingPong", "half-rtt", sizes),
                                  ("Barrier", "completion", [0]),
                                  ("Alltoall", "completion", sizes)):
        for size in psizes:
            label = pattern if pattern == "Barrier" else f"{pattern} {report.size_text(size)}"
            panels[label] = {k: summary(r, pattern, what).get(size) for k, r in runs.items()}
    return panels


def seed003(ctx):
    """MPIBench distributions on Bunyip and Perseus (scaled): coc against MPICH."""
    sizes = [8] if ctx.quick else [8, 4096]
    scale = ctx.scale or (1 if ctx.quick else 2)
    out = {"series": {}, "images": [], "lines": [], "applications": []}
    for topology in ("bunyip", "perseus"):
        with ctx.testbed(topology, scale=scale) as bed:
            hosts = interleave(bed)
            placement = [(bed.state["hosts"][h]["site"], h,
                          [i["network"] for i in bed.interfaces(h)]) for h in hosts]
            patterns = ["PingPong", "Barrier", "Alltoall"]
            runs = {COC: coc_job(bed, hosts, bench_run(patterns, sizes, ctx.out / topology /
                                                       "coc", quick=ctx.quick), pin=ctx.pin),
                    MPICH: mpich_job(bed, placement, bench_run(
                        patterns, sizes, ctx.out / topology / "mpich", quick=ctx.quick),
                        pin=ctx.pin)}
        panels = distribution_panels(runs, sizes)
        out["series"][topology] = panels
        out["images"].append(plot_distributions(
            panels, ctx.img / f"repro-seed003-{topology}.png",
            f"{topology} scaled to {len(hosts)} hosts, one rank each: distributions "
            f"(PingPong between {hosts[0]} and {hosts[1]}; collectives: every rank)"))
        out["lines"] += [f"**{topology}** (`--scale {scale}`: {len(hosts)} hosts, one rank "
                         f"each; PingPong {hosts[0]} ↔ {hosts[1]}): median (p10–p90), p99",
                         "", f"| operation | {COC} | {MPICH} | {COC} / {MPICH} |",
                         "|---|---:|---:|---:|"]
        for label, per in panels.items():
            a, b = per[COC], per[MPICH]
            out["lines"].append(f"| {label} | {cell(a)}, p99 {us(a and a['p99'])} | "
                                f"{cell(b)}, p99 {us(b and b['p99'])} | {ratio(a, b)} |")
        out["lines"].append("")
    return out


def seed004(ctx):
    """Ping-pong across the UF meta-cluster as injected WAN latency grows: coc vs two relays."""
    delays_ms = [0, 10] if ctx.quick else [0, 1, 5, 10, 20, 50, 100]
    sizes = [8] if ctx.quick else [8, 4096, 65536]
    series = {COC: {}, CHAIN: {}}
    apps = []
    with ctx.testbed("uf-metacluster", scale=1) as bed:
        for ms in delays_ms:
            delay = [f"russell-uplink={ms}ms" if ms else "russell-uplink=0"]
            series[COC][ms] = coc_job(bed, ["zeta01", "acis01"], pingpong_run(
                sizes, ctx.out / f"coc-{ms}ms.json", quick=ctx.quick,
                iterations=None if ms < 5 else 20), delays=delay, pin=ctx.pin)
            series[CHAIN][ms] = chain_pingpong(bed, UF_CHAIN, sizes, quick=ctx.quick,
                                               iterations=None if ms < 5 else 20,
                                               delay_us=ms * 1000, pin=ctx.pin)
            apps += [a for a in run_applications(ctx, bed, "seed004", delay) if a not in apps]
    img = plot_sweep(series, sizes, delays_ms, ctx.img / "repro-seed004-sweep.png",
                     ctx.title("UF meta-cluster: ping-pong zeta01 ↔ acis01 through russell"))
    lines = ["Ping-pong zeta01 ↔ acis01 through russell, half round trip: median "
             "(p10–p90; p99 for the relays), by injected one-way WAN latency", "",
             "| WAN latency | size | " + " | ".join(series) + f" | {COC} − {CHAIN} |",
             "|---:|---:|" + "---:|" * (len(series) + 1)]
    for ms in delays_ms:
        for s in sizes:
            a, b = series[COC][ms].get(s), series[CHAIN][ms].get(s)
            diff = "–" if a is None or b is None else f"{a['median'] - b['median']:+.0f} µs"
            lines.append(f"| {ms} ms | {report.size_text(s)} | {cell(a)} | {cell(b)} | "
                         f"{diff} |")
    return {"series": {k: {str(ms): v for ms, v in per.items()} for k, per in series.items()},
            "applications": apps, "images": [img], "lines": lines}


EXPERIMENTS = {e.name: e for e in (
    Experiment("seed000", "PingPong between sub-clusters", "Balkanski, Trams & Rehm 2003",
               "chemnitz-2003", seed000),
    Experiment("seed001", "One proxy against two", "Park, Park, Kwon & Park (MPICH-GP)",
               "private-pair", seed001),
    Experiment("seed003", "MPIBench distributions", "Vaughan, Grove & Coddington",
               "bunyip, perseus", seed003),
    Experiment("seed004", "Latency under injected WAN delay", "Zhao 2005",
               "uf-metacluster", seed004),
)}


def _strip(obj):
    """Drop raw samples from a result before writing JSON (they stay in each job's output)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "samples"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def format_report(exp, result, command, load):
    """Return report.md for one experiment: how it was made, tables, applications, plots."""
    lines = [f"# {exp.name}: {exp.title} ({exp.paper})", "",
             f"Command: `{command}` — topology {exp.topology}; load average at the start "
             f"{load}.", "", *result["lines"], ""]
    apps = result["applications"]
    if apps:
        lines += ["Applications (coc; time and communication time as the program reports "
                  "them):", "", "| program | arguments | ranks | delay | status | verified | "
                  "time | communication |", "|---|---|---:|---|---|---|---:|---:|"]
        for a in apps:
            time_s = f"{a['time']:.3f} s" if a.get("time") is not None else "–"
            comm = (f"{a['comm_time']:.3f} s ({a['comm_time'] / a['time']:.0%})"
                    if a.get("comm_time") is not None and a.get("time") else "–")
            lines.append(f"| {a['app']} | {a.get('args') or '–'} | {a.get('ranks', '–')} | "
                         f"{' '.join(a.get('delays') or []) or '–'} | {a['status']} | "
                         f"{a.get('verified', '–')} | {time_s} | {comm} |")
        lines.append("")
    lines += [f"![{exp.name}]({Path(p).name})" for p in result["images"]]
    return "\n".join(lines) + "\n"


def reproduce(name, out, *, img=None, quick=False, scale=None, pin=False, examples=None,
              command=None):
    """Run experiment ``name``; write results.json, report.md and plots; return the result."""
    exp = EXPERIMENTS[name]
    out = Path(out)
    img = Path(img) if img else out
    out.mkdir(parents=True, exist_ok=True)
    img.mkdir(parents=True, exist_ok=True)
    if not plots.available():
        raise CocError(f"coc bench reproduce: {plots.SKIPPED}")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    command = command or f"coc bench reproduce {name}{' --quick' if quick else ''}"
    ctx = Context(out, img, quick, scale, command, pin, Path(examples or EXAMPLES))
    result = exp.run(ctx)
    result["meta"] = {"experiment": name, "topology": exp.topology, "quick": quick,
                      "scale": scale, "pinned": pin, "testbeds": ctx.testbeds, "load": load,
                      "command": command,
                      "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    result["images"] = [str(p) for p in result["images"]]
    (out / "results.json").write_text(json.dumps(_strip(result), indent=1, default=str))
    (out / "report.md").write_text(format_report(exp, result, command, load))
    return result


def _main(args):
    """Run ``coc bench reproduce``."""
    args.out = args.out or Path(f"reproduce-{args.name}")
    command = " ".join(["coc bench reproduce", args.name, *(["--quick"] if args.quick else []),
                        *([f"--scale {args.scale}"] if args.scale else []),
                        *(["--pin"] if args.pin else []),
                        *([f"--examples {args.examples}"] if args.examples else []),
                        *([f"--img {args.img}"] if args.img else []), "--out", str(args.out)])
    try:
        reproduce(args.name, args.out, img=args.img, quick=args.quick, scale=args.scale,
                  pin=args.pin, examples=args.examples, command=command)
    except (CocError, subprocess.TimeoutExpired) as exc:
        print(f"coc bench reproduce {args.name}: {exc}", file=sys.stderr)
        return 1
    print((Path(args.out) / "report.md").read_text())
    print(f"written to {args.out}/ (report.md, results.json; plots in {args.img or args.out}/)")
    return 0


def register(patterns_parsers):
    """Add ``coc bench reproduce NAME`` to the ``coc bench`` sub-commands."""
    p = add_pattern(patterns_parsers, "reproduce", "rerun a paper's experiment on its "
                    "topology's testbed (needs root)", __doc__, _main)
    p.add_argument("name", choices=sorted(EXPERIMENTS), help="the experiment (paper seed)")
    p.add_argument("--quick", action="store_true", help="few sizes, delays and trials (CI)")
    p.add_argument("--scale", type=int, metavar="K",
                   help="hosts per site and switch on large machines (seed003; default 2, "
                        "1 with --quick)")
    p.add_argument("--pin", action="store_true",
                   help="run every path on CPU 0 (taskset -c 0; coc's waits never spin): "
                        "software paths compared without cross-CPU wake-ups")
    p.add_argument("--examples", type=Path, metavar="DIR",
                   help="where the papers' applications are (default: examples/ of this "
                        "source tree)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="output directory (default: reproduce-NAME)")
    p.add_argument("--img", type=Path, metavar="DIR",
                   help="directory for the PNG plots (default: --out), e.g. docs/img")
