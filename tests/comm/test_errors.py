"""Errors: mismatched collective arguments, a lost peer, restricted unpickling across sites."""

import pickle
import re

import numpy as np
import pytest
from comm_helpers import assert_clean, run_job

from coc.comm import pickling
from hang_bounds import scaled

pytestmark = pytest.mark.timeout(120)


def test_mismatched_counts_stop_the_job_with_a_clear_message():
    proc, _ = run_job("errors.py", 4, "count", timeout=scaled(30), check=False)
    assert proc.returncode == 1, proc.stderr
    assert "CollectiveMismatchError" in proc.stderr, proc.stderr
    assert re.search(r"rank \d sent (32|40) bytes but rank \d expected (40|32)", proc.stderr)


@pytest.mark.parametrize("mode, message", [
    ("root", r"rank \d called bcast with roots \[(0|1)\] and buffer sizes \[\] but rank \d "
             r"called bcast with roots \[(1|0)\]"),
    ("kind", r"rank \d called (bcast|gather) with roots \[1\] and buffer sizes \[\] but rank \d "
             r"called (gather|bcast)"),
])
def test_checked_collectives_name_the_mismatch(mode, message):
    """Wrong roots and names send no message a cheap check sees; COC_CHECK_COLLECTIVES does."""
    proc, _ = run_job("errors.py", 4, mode, timeout=scaled(30), check=False,
                      env={"COC_CHECK_COLLECTIVES": "1"})
    assert proc.returncode == 1, proc.stderr
    assert "CollectiveMismatchError" in proc.stderr, proc.stderr
    assert re.search(message, proc.stderr), proc.stderr


def test_abort_stops_the_job_with_its_code():
    proc, _ = run_job("errors.py", 4, "abort", timeout=scaled(30), check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "rank 3 called Abort(3)" in proc.stderr


@pytest.mark.parametrize("n", [2, 4])
def test_lost_peer_raises_instead_of_hanging(n):
    """The last rank (other site) dies while rank 0 waits for it: PeerLost, in bounded time."""
    proc, reports = run_job("errors.py", n, "lost", timeout=scaled(40), check=False)
    assert 0 in reports, proc.stdout + proc.stderr
    assert_clean({0: reports[0]})
    assert reports[0]["seconds"] < scaled(15)     # bounded, not hung


def test_lost_peer_never_spoken_to_raises():
    """Rank 0 waits on a rank of the other site it never exchanged a byte with; it dies."""
    proc, reports = run_job("errors.py", 4, "lost-silent", timeout=scaled(20), check=False)
    assert 0 in reports, proc.stdout + proc.stderr
    assert_clean({0: reports[0]})
    assert reports[0]["seconds"] < scaled(15)     # bounded, not hung


def test_restricted_unpickler_refuses_classes_from_other_sites():
    proc, reports = run_job("errors.py", 4, "unpickle", timeout=scaled(30))
    assert_clean(reports)


def test_restricted_unpickler_locally():
    stream, buffers = pickling.dumps({"x": np.arange(5000), "s": {1, 2}, "c": 1 + 2j})
    pickling.set_unpickler("restricted-all")
    try:
        got = pickling.loads(stream, buffers)
        assert got["s"] == {1, 2} and got["x"].sum() == sum(range(5000))
        with pytest.raises(pickle.UnpicklingError, match="os.system is not allowed"):
            pickling.loads(b"cos\nsystem\n(S'true'\ntR.")
        with pytest.raises(ValueError, match="unpickler mode"):
            pickling.set_unpickler("none")
    finally:
        pickling.set_unpickler("default")
