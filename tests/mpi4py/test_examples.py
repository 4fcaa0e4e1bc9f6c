"""The mpi4py example programs print the same under mpiexec and under coc-run across sites."""

import sys

import pytest
from mpi4py_helpers import EXAMPLES, SIZES, coc_run, mpiexec, need_mpiexec, ok

pytestmark = [pytest.mark.timeout(200), need_mpiexec]
NAMES = ["ring", "pingpong", "jacobi", "master_worker", "reductions", "split"]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_same_output_under_both_launchers(name, n):
    program = EXAMPLES / f"{name}.py"
    real = ok(mpiexec(n, sys.executable, program))
    ours = ok(coc_run(n, "python", program))
    assert real.strip(), "the example printed nothing"
    assert ours == real
