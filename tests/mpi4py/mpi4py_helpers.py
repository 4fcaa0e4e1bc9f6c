"""Run one mpi4py program under plain ``mpiexec`` (the real mpi4py) and under coc-run --mpi4py."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "comm"))
from comm_helpers import COC_RUN, SIZES, placement  # noqa: E402

__all__ = ["PROGRAMS", "EXAMPLES", "SIZES", "coc_run", "mpiexec", "need_mpiexec", "ok"]

PROGRAMS = Path(__file__).parent / "programs"
EXAMPLES = Path(__file__).parents[2] / "examples" / "mpi4py"
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
need_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="needs mpiexec (pip install mpich)")


def _run(cmd, timeout, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def coc_run(n, *command, mode=True, timeout=60, options=(), cwd=None):
    """Run ``command`` on ``n`` ranks over both sites of two-sites; return the process."""
    cmd = [*COC_RUN, *(["--mpi4py"] if mode else []), *placement(n), *options,
           "--timeout", str(timeout), *map(str, command)]
    return _run(cmd, timeout, cwd)


def mpiexec(n, *command, timeout=60, cwd=None):
    """Run ``command`` on ``n`` ranks with MPICH's mpiexec and the real mpi4py."""
    return _run(["timeout", str(timeout), MPIEXEC, "-n", str(n), *map(str, command)], timeout,
                cwd)


def ok(proc):
    """Return the stdout of a process that must have succeeded."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout
