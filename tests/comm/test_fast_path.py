"""The binding's point-to-point (``coc._engine.Direct``) against the general path.

The rank program sends with one path and receives with the other around the in-band limit
of objects, with ``ANY_SOURCE``/``ANY_TAG``, statuses, counters, errors and the restricted
unpickler, and runs blocking collectives (the fast path's) next to non-blocking ones. The
second program does the same for ``Isend``/``Irecv`` and their requests.
"""

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("n", (1, 2, 4))
def test_fast_path_matches_general_path(job, n):
    job("fast_path.py", n)


@pytest.mark.parametrize("n", (1, 2, 4))
def test_fast_requests_match_general_requests(job, n):
    """Isend/Irecv's BufferRequest against the general path's Single (programs/fast_requests.py)."""
    job("fast_requests.py", n)
