"""Topology-aware collectives: one exchange per pair of sites instead of one per rank."""

import pytest
from comm_helpers import assert_clean, run_job

pytestmark = pytest.mark.timeout(120)

#: Messages crossing between the two sites with the multi-level algorithms (any rank count
#: with ranks on both sites): one per site pair for rooted operations, one each way otherwise.
TOPOLOGY_CROSSINGS = {"bcast": 1, "reduce": 1, "gather": 1, "allreduce": 2, "Allreduce": 2,
                      "barrier": 2, "allgather": 2, "alltoall": 2, "Allgather": 2,
                      "Alltoall": 2}


@pytest.mark.parametrize("n", [4, 8])
def test_collectives_cross_sites_once_per_pair(n):
    _, reports = run_job("topology_aware.py", n, 1)
    assert_clean(reports)
    crossings = reports[0]["crossings"]
    assert reports[0]["sites"] == 2
    assert {op: c["topology"] for op, c in crossings.items()} == TOPOLOGY_CROSSINGS
    for op, c in crossings.items():
        assert c["flat"] >= c["topology"], op
    assert sum(c["flat"] for c in crossings.values()) > 2 * sum(TOPOLOGY_CROSSINGS.values())
    if n == 8:   # flat alltoall: every rank of one site to every rank of the other, both ways
        assert crossings["alltoall"]["flat"] == 2 * 4 * 4


def test_one_rank_per_site_crosses_alike():
    """With one rank per site both algorithms send the same messages across."""
    _, reports = run_job("topology_aware.py", 2, 1)
    assert_clean(reports)
    crossings = reports[0]["crossings"]
    assert crossings["alltoall"] == {"flat": 2, "topology": 2}


def test_algorithm_choice():
    """auto: multi-level only when a communicator spans sites and some site has several ranks."""
    from coc.comm.collectives import base

    assert base.collective_algorithm() == "auto"
    assert base.use_topology(2, 8) and not base.use_topology(2, 2)
    assert not base.use_topology(1, 8) and not base.use_topology(2, 8, "flat")
    assert base.use_topology(2, 2, "topology")
    base.set_collective_algorithm("flat")
    try:
        assert not base.use_topology(2, 8)
    finally:
        base.set_collective_algorithm("auto")
    with pytest.raises(ValueError, match="collective algorithm 'tree'"):
        base.set_collective_algorithm("tree")
