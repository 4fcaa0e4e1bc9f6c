"""The round trips the two-rank benchmarks time, written once for all of them.

``comm_vs_mpi4py.py``, ``small_messages.py``, ``mpi4py_mode.py``, ``py_overhead.py`` and
``object_path.py`` import it; they run as
scripts (``python benchmarks/NAME.py``, and as ranks ``python benchmarks/NAME.py --rank``),
so this directory is first on ``sys.path`` for the driver and the ranks alike. ``rank`` is
passed in, not asked of ``comm`` inside the timed loop.
"""

import json
import shutil
import subprocess

__all__ = ["buffer_round_trip", "object_round_trip", "result_of", "run_two_ranks"]


def buffer_round_trip(comm, buf, rank, peer, tag=1):
    """Rank 0 sends ``buf`` to ``peer`` and receives it back; the peer echoes it."""
    if rank == 0:
        comm.Send(buf, peer, tag)
        comm.Recv(buf, peer, tag)
    else:
        comm.Recv(buf, peer, tag)
        comm.Send(buf, peer, tag)


def object_round_trip(comm, obj, rank, peer, tag=2):
    """Rank 0 sends the object ``obj`` to ``peer`` and receives it back; the peer echoes it."""
    if rank == 0:
        comm.send(obj, peer, tag)
        comm.recv(source=peer, tag=tag)
    else:
        comm.send(comm.recv(source=peer, tag=tag), peer, tag)


def result_of(cmd, timeout=600):
    """Run ``cmd`` (a benchmark's job or rank) and return the JSON it printed after
    ``RESULT ``; stop with its output when it printed none."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60,
                          stdin=subprocess.DEVNULL)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{' '.join(cmd[:6])} failed (exit {proc.returncode}):\n"
                     f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


def run_two_ranks(kind, rank_argv, pin=False, timeout=600):
    """Run ``rank_argv`` (a rank's command line) as a two-rank job on this host — coc's
    (``coc-run --site a=2``) or, for ``kind`` ``"mpi"``, mpi4py's (``mpiexec -n 2``), under
    ``taskset -c 0`` when ``pin`` — and return its :func:`result_of`."""
    from coc.pycommand import python_argv
    if kind == "mpi":
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", "2", *rank_argv]
    else:
        cmd = [*python_argv("coc.launcher.cli"), "--site", "a=2", "--timeout", str(timeout),
               *rank_argv]
    return result_of(["taskset", "-c", "0", *cmd] if pin else cmd, timeout)
