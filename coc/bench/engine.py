"""Measure the engine's ping-pong through 0, 1 and 2 gateways against plain TCP and C relays.

``coc bench engine`` runs, in one invocation and on loopback, six paths between two
endpoints and reports half-round-trip latency (median, p99) and ping-pong bandwidth for
0 B … 4 MiB:

- (a) plain TCP ping-pong (``native/tools/coc_pingpong.c``), direct;
- (b) the same through one minimal epoll byte relay (``native/tools/coc_relay.c``);
- (c) through two chained relays (PACX-MPI's two-daemon shape);
- coc endpoints directly, through one gateway daemon and through two; the endpoints are
  C programs on the engine alone (``native/tools/coc_enginepong.c``, like for like with
  the C references) and Python programs through the binding (what users get).

It prints the ratios issue 3 sets targets for. Run as ``python -m coc.bench.engine`` this
module is instead one Python endpoint of the benchmark, driven through the gateway protocol.
"""

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coc import gatewayclient, keys, protocol
from coc.bench.cli import add_pattern
from coc.errors import CocError
from coc.gateway import apply_update
from coc.gatewayclient import GatewayProcess
from coc.routes import parse_routes

__all__ = ["SIZES", "QUICK_SIZES", "aligned", "iterations", "chain_tables", "tcp_only",
           "engine_sockbuf", "paths", "run_coc", "run_tcp", "measure", "ratios",
           "format_report", "register"]

SIZES = [0, 8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20]
QUICK_SIZES = [0, 8, 4096, 65536, 1 << 20, 4 << 20]
PAGE = 4096
CLIENT, ECHO, FIRST_GATEWAY = 1, 2, 10
STOP_TAG = 1
TIMEOUT = 60.0
SOCKBUF = 4 << 20  # what the engine asks SO_SNDBUF/SO_RCVBUF to be (native/src/sock.h)

# The references: (key, column title, relays on the path).
REFERENCES = [("tcp", "TCP (a)", 0), ("relay1", "1 relay (b)", 1), ("relay2", "2 relays (c)", 2)]
# coc endpoints: C (the engine alone) or Python (through the binding), by column prefix.
ENDPOINTS = {"c": "C", "python": "Py"}

# (title, gateways on the coc path, reference key, metric, comparison, target)
RATIOS = [
    ("1 gateway / 1 relay (b), 8 B latency", 1, "relay1", "latency", "<=", 1.3),
    ("1 gateway / 2 relays (c), 8 B latency", 1, "relay2", "latency", "<", 1.0),
    ("2 gateways / 2 relays (c), 8 B latency", 2, "relay2", "latency", "<=", 1.3),
    ("1 gateway / 1 relay (b), 4 MiB bandwidth", 1, "relay1", "bandwidth", ">=", 1.0),
    ("1 gateway / direct TCP (a), 4 MiB bandwidth", 1, "tcp", "bandwidth", ">=", 0.8),
]


def _coc_key(kind, gateways):
    return f"{kind}-{gateways}gw"


def paths(endpoints):
    """Return ``[(key, column title, run(specs, prefix))]`` for every path, in table order."""
    out = [(key, title, functools.partial(run_tcp, relays))
           for key, title, relays in REFERENCES]
    for kind in endpoints:
        for gateways, where in ((0, "direct"), (1, "1 gw"), (2, "2 gw")):
            out.append((_coc_key(kind, gateways), f"{ENDPOINTS[kind]} {where}",
                        functools.partial(run_coc, gateways, endpoints=kind)))
    return out


def engine_sockbuf():
    """Return the socket buffer size the engine sets on this machine (0: autotuning).

    The engine asks for 4 MiB only where net.core.wmem_max and rmem_max allow it.
    """
    caps = []
    for name in ("wmem_max", "rmem_max"):
        try:
            caps.append(int(Path(f"/proc/sys/net/core/{name}").read_text()))
        except (OSError, ValueError):
            caps.append(0)
    return SOCKBUF if min(caps) >= SOCKBUF else 0


def aligned(nbytes):
    """Return a page-aligned uint8 array of ``nbytes`` (misaligned copies run at half speed)."""
    raw = np.empty(nbytes + PAGE, dtype=np.uint8)
    start = -raw.ctypes.data % PAGE
    return raw[start:start + nbytes]


def iterations(size, quick=False):
    """Return how many timed round trips to run for ``size`` bytes.

    Examples
    --------
    >>> iterations(8), iterations(4 << 20)
    (2000, 50)
    """
    base, least = (300, 20) if quick else (2000, 50)
    return max(least, min(base, base * 16384 // max(size, 16384)))


def chain_tables(chain, addresses):
    """Return ``{endpoint: (peers, routes)}`` for a line of endpoints ``chain``.

    Each endpoint knows only its neighbours' addresses and routes both ends of the line
    through them, so traffic must cross every gateway in between.

    Examples
    --------
    >>> t = chain_tables([1, 10, 2], {1: "a", 10: "g", 2: "b"})
    >>> t[1]
    ({10: 'g'}, {2: [[10, 1]]})
    >>> t[10]
    ({2: 'b', 1: 'a'}, {2: [[2, 1]], 1: [[1, 1]]})
    """
    tables = {}
    for i, node in enumerate(chain):
        peers, routes = {}, {}
        if i + 1 < len(chain):
            peers[chain[i + 1]] = addresses[chain[i + 1]]
            routes[chain[-1]] = [[chain[i + 1], 1]]
        if i > 0:
            peers[chain[i - 1]] = addresses[chain[i - 1]]
            routes[chain[0]] = [[chain[i - 1], 1]]
        tables[node] = (peers, routes)
    return tables


def _summary(size, half_ns):
    """Median and p99 of half round trips, defined as in coc_pingpong.c."""
    half_ns = sorted(half_ns)
    n = len(half_ns)
    return {"size": size, "iters": n, "median_ns": half_ns[n // 2],
            "p99_ns": half_ns[min(n - 1, 99 * n // 100)]}


def tcp_only(address):
    """Keep only the TCP part of an engine address (drop same-host transports).

    Examples
    --------
    >>> tcp_only("tcp://127.0.0.1:4000 unix:@coc/1.2")
    'tcp://127.0.0.1:4000'
    """
    return " ".join(a for a in address.split() if a.startswith("tcp://"))


class _PyEndpoint:
    """A benchmark endpoint in Python (``python -m coc.bench.engine``), via the binding.

    Like a rank, it holds only the key issued for its one neighbour on the chain, never the
    secret (:mod:`coc.keys`).
    """

    def __init__(self, node, role, specs, secret, options, prefix, timeout, log, neighbour):
        issued = keys.issue(secret, node, [neighbour],
                            {neighbour} if neighbour >= FIRST_GATEWAY else set())
        self.proc = GatewayProcess({"self_id": node, "role": role, "specs": specs,
                                    "keys": issued, "listen_host": "127.0.0.1",
                                    "options": options}, module=__name__, prefix=prefix,
                                   timeout=timeout, stderr=log)
        self.address = self.proc.address

    def configure(self, peers, routes):
        self.proc.request(gatewayclient.update(peers, routes))

    def results(self, timeout):
        return self.proc.read(timeout)["results"]

    def stop(self):
        self.proc.stop()

    def kill(self):
        self.proc.kill()


class _CEndpoint:
    """A benchmark endpoint in C (``native/tools/coc_enginepong.c``), without Python."""

    def __init__(self, node, role, specs, secret, options, prefix, timeout, log, neighbour):
        knobs = [options.get(k, 0) for k in ("eager_limit", "fragment_size", "forward_window",
                                             "spin_ns")]
        peer = ECHO if node == CLIENT else CLIENT
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [*prefix, str(native_tools()["coc_enginepong"]), role, str(node), str(peer),
             *map(str, knobs), *(f"{size}:{n}" for size, n in specs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self.proc.stdin.write(secret.hex() + "\n")
        self.proc.stdin.flush()
        self.address = _line(self.proc, timeout).split(None, 1)[1]

    def configure(self, peers, routes):
        lines = [f"peer {k} {v}" for k, v in peers.items()]
        lines += [f"route {dest} {hop}" for dest, [[hop, _]] in routes.items()]
        self.proc.stdin.write("\n".join([*lines, "go"]) + "\n")
        self.proc.stdin.flush()

    def results(self, timeout):
        rows = []
        while (line := _line(self.proc, timeout)) != "done":
            rows.append(dict(zip(("size", "iters", "median_ns", "p99_ns"),
                                 map(int, line.split()))))
        return rows

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(self.timeout)

    def kill(self):
        _reap(self.proc)


def run_coc(gateways, specs, *, prefix=(), options=None, transport="tcp", endpoints="python",
            timeout=TIMEOUT):
    """Ping-pong between two coc endpoints through ``gateways`` gateway daemons.

    ``endpoints`` is "python" (through the binding) or "c" (the engine's C API alone).
    ``transport="tcp"`` hands peers only TCP addresses, as the references use; ``"any"``
    lets the engine take its same-host path.
    """
    secret, options = os.urandom(32), options or {}
    kind = _PyEndpoint if endpoints == "python" else _CEndpoint
    procs = {}
    log = tempfile.TemporaryFile()  # everyone's stderr, shown only when something fails
    gw_ids = [FIRST_GATEWAY + i for i in range(gateways)]
    chain = [CLIENT, *gw_ids, ECHO]
    try:
        for node, role, neighbour in ((ECHO, "echo", chain[-2]), (CLIENT, "client", chain[1])):
            procs[node] = kind(node, role, specs, secret, options, prefix, timeout, log,
                               neighbour)
        for node in gw_ids:
            procs[node] = GatewayProcess({"self_id": node, "secret": secret,
                                          "options": options}, prefix=prefix,
                                         timeout=timeout, stderr=log)
        pick = tcp_only if transport == "tcp" else str
        tables = chain_tables(chain, {n: pick(p.address) for n, p in procs.items()})
        for node in gw_ids:
            procs[node].update(*tables[node])
        for node in (ECHO, CLIENT):  # the client last: it starts at once
            procs[node].configure(*tables[node])
        results = procs[CLIENT].results(timeout * len(specs))
        for p in procs.values():
            p.stop()
        return results
    except BaseException:
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace"))
        raise
    finally:
        for p in procs.values():
            p.kill()
        log.close()


def native_tools():
    """Build (if needed) the programs in native/tools/; return ``{name: path}``.

    They live in a source checkout: the one coc runs from (an editable install), else the
    one in the working directory (the root of a clone coc was ``pip install``-ed from).
    """
    trees = (Path(__file__).resolve().parents[2], Path.cwd())
    native = next((tree / "native" for tree in trees if (tree / "native" / "Makefile").is_file()),
                  None)
    if native is None or shutil.which("make") is None:
        raise CocError("coc bench engine needs the reference programs in native/tools/; "
                       "run it from the root of a source checkout of coc, with make and a C "
                       "compiler")
    names = ("coc_pingpong", "coc_relay", "coc_enginepong")
    result = subprocess.run(["make", "-C", str(native), "-s", *(f"build/{n}" for n in names)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise CocError(f"building the reference programs failed:\n{result.stderr[-2000:]}")
    return {n: native / "build" / n for n in names}


def _line(proc, timeout):
    """Return the next line a tool prints on stdout; CocError on timeout or exit."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise CocError(f"{proc.args} printed nothing within {timeout} s")
    line = proc.stdout.readline()
    if not line:
        raise CocError(f"{proc.args} exited (code {proc.wait(timeout)}) before answering")
    return line.strip()


def _reap(proc):
    """Terminate a tool (KILL after a grace period) and close its pipes."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout):
        if f:
            try:
                f.close()
            except OSError:
                pass


def run_tcp(relays, specs, *, prefix=(), sockbuf=0, timeout=TIMEOUT):
    """Plain TCP ping-pong through ``relays`` chained byte relays (0: direct).

    ``sockbuf`` sets SO_SNDBUF/SO_RCVBUF on every socket (0: the kernel's autotuning).
    """
    tools = native_tools()
    tuning = ("-b", sockbuf) if sockbuf else ()
    procs = []
    try:
        def start(tool, *args):
            procs.append(subprocess.Popen([*prefix, *map(str, (tools[tool], *tuning, *args))],
                                          stdout=subprocess.PIPE, text=True))
            word, port = _line(procs[-1], timeout).split()
            return port

        port = start("coc_pingpong", "server", "127.0.0.1", 0)
        for _ in range(relays):
            port = start("coc_relay", "127.0.0.1", 0, "127.0.0.1", port)
        out = subprocess.run([*prefix, *map(str, (tools["coc_pingpong"], *tuning)), "client",
                              "127.0.0.1", port, *(f"{s}:{n}" for s, n in specs)],
                             capture_output=True, text=True, timeout=timeout * len(specs),
                             check=True).stdout
    finally:
        for p in reversed(procs):
            _reap(p)
    return [dict(zip(("size", "iters", "median_ns", "p99_ns"), map(int, line.split())))
            for line in out.splitlines()]


def measure(sizes, *, endpoints=("c", "python"), pin=False, quick=False, repeat=1,
            options=None, transport="tcp", sockbuf=None, progress=None):
    """Run every path ``repeat`` times, interleaved; return per-path medians of the runs.

    ``sockbuf`` is the references' socket buffer size (None: what the engine sets).
    """
    sockbuf = engine_sockbuf() if sockbuf is None else sockbuf
    specs = [[s, iterations(s, quick)] for s in sizes]
    prefix = ("taskset", "-c", "0") if pin else ()
    runs = {key: [] for key, _, _ in paths(endpoints)}
    for rep in range(repeat):
        for key, _, run in paths(endpoints):
            if progress:
                progress(f"run {rep + 1}/{repeat}: {key}{' (pinned)' if pin else ''}")
            kwargs = ({"sockbuf": sockbuf} if run.func is run_tcp else
                      {"options": options, "transport": transport})
            runs[key].append(run(specs, prefix=prefix, **kwargs))
    return {key: [{"size": rows[0]["size"], "iters": rows[0]["iters"],
                   "median_ns": statistics.median(r["median_ns"] for r in rows),
                   "p99_ns": statistics.median(r["p99_ns"] for r in rows)}
                  for rows in zip(*results)]
            for key, results in runs.items()}


def _metric(results, key, size, metric):
    row = next((r for r in results[key] if r["size"] == size), None)
    if row is None:
        return None
    return row["median_ns"] if metric == "latency" else size / row["median_ns"]


def ratios(results):
    """Return the ratios issue 3 names: ``[(title, value, comparison, target, met)]``."""
    out = []
    for kind, label in ENDPOINTS.items():
        for title, gateways, ref, metric, cmp, target in RATIOS:
            size = 8 if metric == "latency" else 4 << 20
            key = _coc_key(kind, gateways)
            if key not in results:
                continue
            a, b = _metric(results, key, size, metric), _metric(results, ref, size, metric)
            if a is None or b is None:
                continue
            value = a / b
            met = {"<=": value <= target, "<": value < target, ">=": value >= target}[cmp]
            out.append((f"{label}: {title}", value, cmp, target, met))
    return out


def _size_text(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def format_report(results, title):
    """Return the latency and bandwidth tables and the ratios as text."""
    titles = {key: name for key, name, _ in paths(ENDPOINTS)}
    keys = list(results)
    sizes = [r["size"] for r in results[keys[0]]]
    head = f"{'size':>8}" + "".join(f"{titles[k]:>15}" for k in keys)
    lines = [title, "", "half round trip, median / p99 (µs)", head]
    for i, size in enumerate(sizes):
        cells = (f"{results[k][i]['median_ns'] / 1e3:.1f}/{results[k][i]['p99_ns'] / 1e3:.0f}"
                 for k in keys)
        lines.append(f"{_size_text(size):>8}" + "".join(f"{c:>15}" for c in cells))
    lines += ["", "ping-pong bandwidth, size / median half round trip (MB/s)", head]
    for i, size in enumerate(sizes):
        if size >= 4096:
            cells = (f"{size / results[k][i]['median_ns'] * 1e3:.0f}" for k in keys)
            lines.append(f"{_size_text(size):>8}" + "".join(f"{c:>15}" for c in cells))
    lines += ["", "ratios (issue 3 targets)"]
    for name, value, cmp, target, met in ratios(results):
        lines.append(f"  {name:<50} {value:5.2f}  target {cmp} {target}  "
                     f"{'met' if met else 'MISSED'}")
    return "\n".join(lines)


def _bench(args):
    """Run ``coc bench engine``."""
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    options = {k: v for k, v in (("eager_limit", args.eager_limit),
                                 ("fragment_size", args.fragment_size),
                                 ("forward_window", args.forward_window),
                                 ("spin_ns", args.spin_ns)) if v}
    modes = {"no": [False], "yes": [True], "both": [False, True]}[args.pin]
    endpoints = list(ENDPOINTS) if args.endpoints == "both" else [args.endpoints]
    report = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "repeat": args.repeat,
              "options": options, "transport": args.transport,
              "sockbuf": engine_sockbuf() if args.sockbuf is None else args.sockbuf,
              "runs": {}}
    for pin in modes:
        label = "pinned to CPU 0" if pin else "unpinned"
        results = measure(sizes, endpoints=endpoints, pin=pin, quick=args.quick,
                          repeat=args.repeat, options=options, transport=args.transport,
                          sockbuf=args.sockbuf,
                          progress=lambda msg: print(msg, file=sys.stderr, flush=True))
        print(format_report(results, f"coc bench engine, {label}, coc over {args.transport}, "
                                     f"median of {args.repeat} run(s)"))
        print()
        report["runs"][label] = {"results": results, "ratios": [
            dict(zip(("ratio", "value", "comparison", "target", "met"), r))
            for r in ratios(results)]}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _sizes(text):
    """Parse ``--sizes`` ("8,4096,1048576")."""
    sizes = [int(v) for v in text.split(",")]
    if any(not 0 <= v <= 4 << 20 for v in sizes):
        raise ValueError("sizes must be 0 ... 4 MiB")
    return sizes


def register(patterns):
    """Add ``coc bench engine`` to the ``coc bench`` sub-commands."""
    p = add_pattern(patterns, "engine", "engine ping-pong through 0-2 gateways vs TCP and C "
                    "relays", __doc__, _bench)
    p.add_argument("--pin", nargs="?", const="yes", default="no", choices=["no", "yes", "both"],
                   help="run every process with taskset -c 0 (yes), or both ways (both)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and round trips")
    p.add_argument("--sizes", type=_sizes, metavar="N,N,...",
                   help="message sizes in bytes (default 0 B ... 4 MiB)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run every path N times, interleaved, and report medians")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--endpoints", choices=["c", "python", "both"], default="both",
                   help="coc endpoints in C (the engine alone), in Python (through the "
                        "binding), or both")
    p.add_argument("--sockbuf", type=int, default=None, metavar="BYTES",
                   help="SO_SNDBUF/SO_RCVBUF of the references' sockets (default: what the "
                        "engine sets, 4 MiB where the system allows; 0: autotuning)")
    p.add_argument("--transport", choices=["tcp", "any"], default="tcp",
                   help="coc endpoints reach each other over TCP like the references (tcp), "
                        "or may use the engine's same-host path (any)")
    for knob in ("eager-limit", "fragment-size", "forward-window"):
        p.add_argument(f"--{knob}", type=int, default=0, metavar="BYTES",
                       help=f"engine {knob.replace('-', ' ')} (0: engine default)")
    p.add_argument("--spin-ns", type=int, default=0, metavar="NS",
                   help="how long waits poll before sleeping (0: default, -1: never)")


# ---- one endpoint of the benchmark, run as ``python -m coc.bench.engine`` ------------------

def _echo(eng, peer):
    """Send every message back to ``peer`` until one with STOP_TAG arrives."""
    from coc._native import engine as _engine

    buf = aligned(4 << 20)
    while True:
        st = eng.irecv(buf, peer, _engine.ANY_TAG).wait(TIMEOUT)
        if st.tag == STOP_TAG:
            return
        eng.isend(buf[:st.count], peer).wait(TIMEOUT)


def _client(eng, peer, specs):
    """Time ping-pongs of every (size, iterations) with ``peer``; then stop it."""
    results = []
    for size, iters in specs:
        sbuf, rbuf = aligned(size), aligned(size)
        sbuf[:] = 0x5A
        half = []
        for k in range(iters // 10 + 2 + iters):
            t0 = time.perf_counter_ns()
            r = eng.irecv(rbuf, peer, 0)
            eng.isend(sbuf, peer, 0).wait(TIMEOUT)
            r.wait(TIMEOUT)
            half.append((time.perf_counter_ns() - t0) // 2)
        results.append(_summary(size, half[iters // 10 + 2:]))
    eng.isend(b"", peer, STOP_TAG).wait(TIMEOUT)
    return results


def _endpoint_main():
    """Be one endpoint, driven like a gateway daemon (:mod:`coc.gatewayclient`): ``config``
    → ``address``; ``update`` → ``ok``, the run, then ``results`` (the client); EOF → ``exit``."""
    from coc._native import engine as _engine

    def reply(message):
        protocol.write_message(1, message)

    driver = protocol.MessageReader(0, "the benchmark's driver (stdin)")
    cfg = driver.read()
    peer = ECHO if cfg["self_id"] == CLIENT else CLIENT
    with _engine.Engine(cfg["self_id"], keys=keys.table(cfg["keys"], "benchmark endpoint"),
                        listen_host=cfg["listen_host"], **cfg.get("options", {})) as eng:
        reply({"type": "address", "address": eng.address})
        update = driver.read()
        apply_update(eng, {int(k): v for k, v in update["peers"].items()},
                     parse_routes(update["routes"]))
        reply({"type": "ok"})
        if cfg["role"] == "echo":
            _echo(eng, peer)
        else:
            reply({"type": "results", "results": _client(eng, peer, cfg["specs"])})
        while driver.read() is not None:  # until EOF: the driver's signal to exit
            pass
        reply({"type": "exit", "reason": "eof", "stats": eng.stats()})
    return 0


if __name__ == "__main__":
    sys.exit(_endpoint_main())
