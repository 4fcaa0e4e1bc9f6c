"""A receive from a rank that exited normally fails, naming both ranks, instead of hanging."""

import pytest

from launcher_helpers import program

_PLACEMENTS = {"within a site": ["--site", "a=2"],
               "across sites": ["--site", "a=1", "--site", "b=1"]}


@pytest.mark.parametrize("where", sorted(_PLACEMENTS))
def test_a_receive_from_a_rank_that_exited_fails_naming_both(coc_run, where):
    # rank 0 waits in finalize for rank 1 (which waits for rank 0): bound that wait
    done = coc_run(*_PLACEMENTS[where], "-x", "COC_FINALIZE_TIMEOUT=2", "--timeout", "60",
                   program("waits.py"), "--mode", "exit", "--send-first", "3", "--sleep", "3",
                   timeout=90)
    assert done.returncode == 1, done.stderr
    assert [line for line in done.stdout.splitlines()] == [f"rank 1 got {i}" for i in range(3)]
    assert "coc.errors.PeerExited: COMM_WORLD: rank 1 waits for a message from rank 0 " \
           "(tag 7), but rank 0 exited without sending it" in done.stderr
    assert "not reached" not in done.stdout
    assert "coc-run: rank 1 (site " in done.stderr
