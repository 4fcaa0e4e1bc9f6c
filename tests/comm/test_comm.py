"""Communicators under coc-run with 1, 2, 4 and 8 ranks over two sites."""

import pytest
from comm_helpers import SIZES
from hang_bounds import scaled

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("n", SIZES)
def test_communicators(job, n):
    job("comm.py", n)


def test_size_one_world_without_coc_run():
    """Without coc-run the world has one rank, and every operation works on it."""
    import numpy as np

    import coc
    comm = coc.init()
    assert coc.COMM_WORLD is comm and (comm.rank, comm.size) == (0, 1)
    assert comm.sendrecv({"x": np.arange(10_000)}, 0, source=0)["x"].sum() == 49_995_000
    req = comm.irecv(source=coc.ANY_SOURCE)
    comm.send("self", 0, tag=5)
    st = coc.Status()
    assert req.wait(st) == "self" and (st.source, st.tag) == (0, 5)
    out = np.empty(3)
    comm.Allreduce(np.ones(3), out)
    assert (out == 1).all()
    assert comm.bcast(1) == 1 and comm.gather(2) == [2] and comm.alltoall([3]) == [3]
    assert comm.Split_level("site").size == 1 and comm.Dup().allreduce(4) == 4
    assert comm.color("wan") == 0 and comm.site
    st = coc.Status()
    comm.Send(b"x", coc.PROC_NULL)
    comm.Recv(bytearray(1), coc.PROC_NULL, status=st)
    assert (st.source, st.count) == (coc.PROC_NULL, 0)
    assert comm.sendrecv("lost", coc.PROC_NULL, source=coc.PROC_NULL) is None


def test_import_coc_stays_cheap():
    """``import coc`` loads neither the communicator API nor NumPy."""
    import subprocess
    import sys
    code = "import sys, coc; print('coc.comm' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=scaled(30)).stdout
    assert out.split() == ["False", "False"]
