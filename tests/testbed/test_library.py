"""Library topologies built as testbeds keep the reachability their files describe."""

import pytest

pytestmark = pytest.mark.root


def test_chemnitz_ipc_ethernets_are_switched_together(testbeds, topology, serve, client):
    bed = testbeds(topology("chemnitz-2003"))
    gbe = bed.address("xeon1", "xeon-gbe")
    serve(bed, "xeon1", gbe, 7301)
    assert client(bed, "athlon1", gbe, 7301) == "ok"  # across the link, no gateway
    sci = bed.address("xeon1", "xeon-sci")
    serve(bed, "xeon1", sci, 7302)
    assert "Network is unreachable" in client(bed, "athlon1", sci, 7302)


def test_perseus_switches_meet_through_the_backplane(testbeds, topology, serve, client):
    bed = testbeds(topology("perseus"), scale=2)
    assert len(bed.hosts) == 10
    far = bed.address("p098")
    serve(bed, "p098", far, 7303)
    assert client(bed, "p001", far, 7303) == "ok"  # sw1 -> backplane -> sw5
    assert bed.latency("p001", "p098") == pytest.approx(60e-6 / 2 + 2e-6 + 2e-6 + 60e-6 / 2)


def test_bunyip_subclusters_share_one_switch(testbeds, topology, serve, client):
    bed = testbeds(topology("bunyip"), scale=2)
    cd = bed.address("d02", "sw-cd")
    serve(bed, "d02", cd, 7304)
    assert client(bed, "c01", cd, 7304) == "ok"
    assert "Network is unreachable" in client(bed, "a01", cd, 7304)  # a is not on sw-cd
