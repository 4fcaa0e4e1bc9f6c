"""Buffer point-to-point under coc-run with 1, 2, 4 and 8 ranks over two sites."""

import pytest
from comm_helpers import SIZES

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("n", SIZES)
def test_buffer_point_to_point(job, n):
    job("p2p_buf.py", n)
