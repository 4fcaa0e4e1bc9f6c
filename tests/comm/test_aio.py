"""asyncio under coc-run with 1, 2, 4 and 8 ranks over two sites."""

import pytest
from comm_helpers import SIZES

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("n", SIZES)
def test_asyncio(job, n):
    job("aio.py", n)
