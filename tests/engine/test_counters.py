"""The message counters (``coc.comm.counters``): C integers in the binding, used as a dict.

How the two paths count is checked in a job (tests/comm/programs/fast_path.py); here the
mapping itself: what reading, copying, setting and resetting it do.
"""

import pytest

from coc._engine import Counters
from coc.comm import counters, reset_counters

NAMES = ["messages", "bytes", "inter_site_messages", "inter_site_bytes", "site_mpi_messages"]


def test_a_mapping_of_the_counter_names():
    c = Counters()
    assert list(c) == c.keys() == NAMES and len(c) == 5
    assert dict(c) == c.copy() == dict.fromkeys(NAMES, 0) == c
    c["bytes"] = 7
    c["messages"] += 2
    c["site_mpi_messages"] += True
    assert dict(c) == {**dict.fromkeys(NAMES, 0), "bytes": 7, "messages": 2,
                       "site_mpi_messages": 1}
    assert c.items() == list(zip(NAMES, c.values()))
    assert "bytes" in c and "frames" not in c and c.get("frames", -1) == -1
    assert repr(c) == repr(dict(c))


def test_unknown_names_and_values_are_refused():
    c = Counters()
    with pytest.raises(KeyError, match="frames"):
        c["frames"]
    with pytest.raises(KeyError):
        c["frames"] = 1
    with pytest.raises(TypeError):
        c["bytes"] = "many"


def test_the_process_counters_reset():
    counters["messages"] = 5
    reset_counters()
    assert dict(counters) == dict.fromkeys(NAMES, 0)
