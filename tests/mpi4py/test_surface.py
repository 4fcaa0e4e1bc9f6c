"""mpi4py's documented behaviour (programs/surface.py) holds under coc-run at 1, 2, 4, 8 ranks.

The same program runs under plain mpiexec with the real mpi4py first, so a check that
misreads mpi4py fails there and not only here.
"""

import sys

import pytest
from mpi4py_helpers import PROGRAMS, SIZES, coc_run, mpiexec, need_mpiexec, ok

pytestmark = pytest.mark.timeout(200)


def _passed(out, n):
    lines = [line for line in out.splitlines() if line.endswith("checks passed")]
    assert sorted(int(line.split()[1].rstrip(":")) for line in lines) == list(range(n)), out
    return {int(line.split()[1].rstrip(":")): int(line.split()[2]) for line in lines}


@pytest.mark.parametrize("n", SIZES)
def test_surface_under_coc_run_across_sites(n):
    counts = _passed(ok(coc_run(n, "python", PROGRAMS / "surface.py")), n)
    assert min(counts.values()) > 100


@need_mpiexec
@pytest.mark.parametrize("n", SIZES)
def test_surface_under_real_mpi4py(n):
    out = ok(mpiexec(n, sys.executable, PROGRAMS / "surface.py"))
    out = out.replace("passedrank", "passed\nrank")      # ranks' lines may interleave
    _passed(out, n)
