"""What a small blocking operation costs in Python: frames, allocations and CPU per call (issue 17).

Three observables that machine load does not move, for ``Send``/``Recv`` of 8 B,
``send``/``recv`` of a 100-byte dict, ``Sendrecv`` of 8 B, non-blocking messages of 8 B
(each rank posts 64 ``Irecv`` and 64 ``Isend``, then ``Wait`` on each or one ``Waitall``;
per message) and the small collectives (``allreduce`` of an int, ``Allreduce`` of one
float64, ``bcast`` of the dict, ``barrier``):

- **Python frames per call**: ``sys.setprofile`` ``call`` events (a generator resumed counts
  again), and the C functions called from Python (``c_call`` events);
- **allocations per call**: calls of CPython's object allocator (``_PyObject_Malloc``,
  ``_PyObject_Calloc``, ``_PyObject_Realloc``: every object, and every ``PyMem_Malloc``)
  and of libc's ``malloc``, counted by ``perf stat`` on uprobes (root; the script adds the
  probes with ``perf probe`` and leaves them, ``perf probe -d 'probe_libpython3:*' -d
  'probe_libc:*'`` removes them): the difference between a run of 2n and of n calls, so
  start-up and attaching cancel;
- **CPU time per call** (``time.thread_time``), only where no call waits: a world of one
  rank sending to itself (``--self``; collectives on one rank cost their Python alone).

Two ranks on one host: coc (``coc-run --site a=2``) and mpi4py + MPICH (``mpiexec -n 2``)
run the same code; rank 0 reports. mpi4py's blocking ``Send`` to itself does not return
under MPICH, so ``--self`` measures coc alone (and mpi4py's ``Sendrecv`` and collectives).

Run (root, a source checkout): ``python benchmarks/py_overhead.py [--calls 1000] [--only
coc|mpi] [--json FILE]``; another build's figures: the same with ``PYTHONPATH=`` its tree.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import time
from functools import partial

from roundtrips import buffer_round_trip, object_round_trip, result_of, run_two_ranks

N = 1000
WINDOW = 64
OBJ = {"step": 7, "name": "halo", "value": 3.25, "ids": [1, 2, 3, 4, 5, 6, 7, 8]}
PROBES = ("_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc")


def _window(comm, np, peer, waitall):
    """Return a body that posts a window of receives from and sends to ``peer``, then
    completes them with ``Wait`` each, or with one call of ``waitall`` when given."""
    bufs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]
    outs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]

    def body():
        reqs = [comm.Irecv(o, peer, 5) for o in outs]
        reqs += [comm.Isend(b, peer, 5) for b in bufs]
        if waitall is not None:
            waitall(reqs)
        else:
            for r in reqs:
                r.Wait()
    return body


def _ops(comm, np, rank, peer, Waitall):
    """Return ``{name: (body, calls per body)}``: each body is one exchange of both ranks
    (a round trip on rank 0 for ``Send``/``Recv`` and ``send``/``recv``; a window of
    messages each way for the non-blocking ones, per message)."""
    buf, out = np.zeros(8, np.uint8), np.zeros(8, np.uint8)
    one, res = np.ones(1), np.zeros(1)
    return {
        "Send + Recv, 8 B": (partial(buffer_round_trip, comm, buf, rank, peer), 2),
        "send + recv, 100-byte dict": (partial(object_round_trip, comm, OBJ, rank, peer), 2),
        "Sendrecv, 8 B": (lambda: comm.Sendrecv(buf, peer, 3, out, peer, 3), 1),
        "Irecv + Isend + Wait, 8 B": (_window(comm, np, peer, None), WINDOW),
        "Irecv + Isend + Waitall, 8 B": (_window(comm, np, peer, Waitall), WINDOW),
        "allreduce(int)": (lambda: comm.allreduce(rank + 1), 1),
        "Allreduce, 1 float64": (lambda: comm.Allreduce(one, res), 1),
        "bcast(100-byte dict)": (lambda: comm.bcast(OBJ if rank == 0 else None, 0), 1),
        "barrier": (lambda: comm.Barrier(), 1),
    }


def _libpython():
    """Return the file holding CPython's allocator: libpython, or the executable itself."""
    name = sysconfig.get_config_var("INSTSONAME")
    path = os.path.join(sysconfig.get_config_var("LIBDIR") or "", name or "")
    return path if name and os.path.exists(path) else os.path.realpath(sys.executable)


def _libc():
    for path in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6"):
        if os.path.exists(path):
            return path
    return None


def ensure_probes():
    """Add the uprobes (once per machine); return the perf event list, or None without perf."""
    perf = shutil.which("perf")
    if perf is None or os.geteuid() != 0:
        return None
    have = subprocess.run([perf, "probe", "-l"], capture_output=True, text=True).stdout
    wanted = [(_libpython(), fn) for fn in PROBES]
    if _libc():
        wanted.append((_libc(), "malloc"))
    for lib, fn in wanted:
        if f":{fn} " not in have and f":{fn}\t" not in have:
            subprocess.run([perf, "probe", "-q", "-x", lib, "--add", fn],
                           capture_output=True, text=True)
    have = subprocess.run([perf, "probe", "-l"], capture_output=True, text=True).stdout
    events = []
    for line in have.splitlines():
        event = line.split()[0] if line.strip() else ""
        if event.split(":")[-1] in (*PROBES, "malloc") and event not in events:
            events.append(event)
    return events or None


def _perf_count(events, body, calls):
    """Run ``body`` ``calls`` times under ``perf stat`` on this process; return
    ``(python allocations, malloc calls)``."""
    proc = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(events), "-p",
                             str(os.getpid())], stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)                   # let perf attach (the same in both runs: it cancels)
    for _ in range(calls):
        body()
    proc.send_signal(signal.SIGINT)
    report = proc.communicate(timeout=30)[1]
    py = libc = 0
    for line in report.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].isdigit():
            if fields[2].endswith(":malloc"):
                libc += int(fields[0])
            else:
                py += int(fields[0])
    return py, libc


def _frames(body, calls):
    """Return ``(Python frames, C calls)`` of ``calls`` runs of ``body``."""
    seen = {"call": 0, "c_call": 0}

    def count(frame, event, arg):
        if event in seen:
            seen[event] += 1
    sys.setprofile(count)
    try:
        for _ in range(calls):
            body()
    finally:
        sys.setprofile(None)
    return seen["call"] - calls, seen["c_call"]     # minus the calls of body itself


def measure(comm, np, rank, peer, calls, events, cpu, waitall, skip=()):
    """Return ``{op: {"frames", "c_calls", "allocs", "mallocs", "cpu_us"}}`` (per call)."""
    out = {}
    for name, (body, per) in _ops(comm, np, rank, peer, waitall).items():
        if name in skip:
            continue
        for _ in range(50):
            body()
        comm.Barrier()
        frames, c_calls = _frames(body, calls)
        row = {"frames": frames / calls / per, "c_calls": c_calls / calls / per}
        if events:
            comm.Barrier()
            a = _perf_count(events, body, calls)
            comm.Barrier()
            b = _perf_count(events, body, 2 * calls)
            row["allocs"] = (b[0] - a[0]) / calls / per
            row["mallocs"] = (b[1] - a[1]) / calls / per
        if cpu:
            runs = []
            for _ in range(5):
                t0 = time.thread_time()
                for _ in range(calls):
                    body()
                runs.append((time.thread_time() - t0) / calls / per * 1e6)
            row["cpu_us"] = statistics.median(runs)
            row["cpu_spread"] = (min(runs), max(runs))
        out[name] = row
    return out


def rank_main(kind, calls, events, alone):
    import numpy as np
    if kind == "coc":
        import coc
        comm, waitall = coc.init(), coc.Request.Waitall
    else:
        from mpi4py import MPI
        comm, waitall = MPI.COMM_SELF if alone else MPI.COMM_WORLD, MPI.Request.Waitall
    rank = comm.Get_rank()
    peer = rank if alone else 1 - rank
    # MPICH's blocking Send to itself never returns
    skip = ("Send + Recv, 8 B", "send + recv, 100-byte dict") if alone and kind == "mpi" else ()
    result = measure(comm, np, rank, peer, calls, events, alone, waitall, skip)
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)


def _job(kind, alone, calls, events):
    me = [sys.executable, os.path.abspath(__file__), "--rank", kind, "--calls", str(calls),
          "--events", ",".join(events or []), *(["--self"] if alone else [])]
    return result_of(me) if alone else run_two_ranks(kind, me)


def _cell(row, key, digits=1):
    if row is None or key not in row:
        return "–"
    return f"{row[key]:.{digits}f}"


def report(results):
    for title, coc_rows, mpi_rows, cpu in (
            ("two ranks on one host", results["coc"], results["mpi"], False),
            ("one rank to itself", results["coc-self"], results["mpi-self"], True)):
        print(f"\n{title}: per call, coc / mpi4py + MPICH")
        head = "| call | Python frames | C calls | object allocations | malloc |"
        head += " CPU µs (min–max) |" if cpu else ""
        print(head)
        print("|---" * (head.count("|") - 1) + "|")
        for name in coc_rows or mpi_rows:
            row, ref = coc_rows.get(name), mpi_rows.get(name)
            cells = [f"{_cell(row, k)} / {_cell(ref, k)}"
                     for k in ("frames", "c_calls", "allocs", "mallocs")]
            if cpu:
                spread = f" ({row['cpu_spread'][0]:.2f}–{row['cpu_spread'][1]:.2f})" if row else ""
                cells.append(f"{_cell(row, 'cpu_us', 2)}{spread} / {_cell(ref, 'cpu_us', 2)}")
            print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=N)
    parser.add_argument("--rank", choices=("coc", "mpi"))
    parser.add_argument("--events", default="")
    parser.add_argument("--self", dest="alone", action="store_true")
    parser.add_argument("--only", choices=("coc", "mpi"),
                        help="measure one side only (a run takes about a minute a side)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.rank:
        rank_main(args.rank, args.calls, [e for e in args.events.split(",") if e], args.alone)
        return
    events = ensure_probes()
    if events is None:
        print("perf or root missing: no allocation counts", file=sys.stderr)
    results = {"coc": {}, "coc-self": {}, "mpi": {}, "mpi-self": {}}
    for kind in ("coc", "mpi") if args.only is None else (args.only,):
        results[kind] = _job(kind, False, args.calls, events)
        results[f"{kind}-self"] = _job(kind, True, args.calls, events)
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
