"""Fixtures for coc bench tests: run a benchmark job under mpiexec or coc-run, bounded in time."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys

import pytest
from hang_bounds import scaled

COC_RUN = [sys.executable, "-m", "coc.launcher.cli"]
BENCH = [sys.executable, "-m", "coc.bench", "run"]


def _mpiexec():
    """Return MPICH's mpiexec, or skip when mpi4py or mpiexec are missing."""
    path = shutil.which("mpiexec")
    if path is None or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("needs mpi4py and an mpiexec (pip install mpich mpi4py)")
    return path


@pytest.fixture
def job(tmp_path):
    """Run ``launcher`` ("mpiexec" or "coc-run") with ``nprocs`` ranks of ``coc bench run``.

    The job runs in its own session; on timeout (a bound against hangs, scaled by
    ``COC_TEST_TIMEOUT_SCALE``; a quick run takes seconds on an idle machine) the whole
    session is killed. Returns the CompletedProcess; its output is printed when the test
    fails.
    """
    def run(launcher, bench_args, *, nprocs=2, timeout=scaled(240), env=None, launcher_args=()):
        if launcher == "mpiexec":
            argv = [_mpiexec(), "-n", str(nprocs), *launcher_args]
        else:
            argv = [*COC_RUN, "--timeout", str(timeout), *launcher_args]
            if "-n" not in launcher_args:
                argv += ["-n", str(nprocs)]
        argv += [*BENCH, *map(str, bench_args)]
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env={**os.environ, **(env or {})})
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            print(out, err)
            pytest.fail(f"{' '.join(argv)} did not finish within {timeout} s")
        print(out)
        print(err, file=sys.stderr)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    return run
