"""coc-run on the testbed follows the model: each hop on its network, size classes, latency.

Socket addresses are read from the kernel (``/proc/net/tcp`` of each rank's namespace) and
forwarding from the gateway daemons' counters. Timings are only bounded against hangs and
against a missing emulated latency, never compared for speed. Needs root (CI runs as root).
"""

import os
import statistics
from pathlib import Path

import pytest

from coc.bench.verify import format_table, measure, verify

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the netns spawner runs "
                                 "ranks in network namespaces (CI runs these as root)")]

GOOD = Path(__file__).parents[1] / "data" / "topology-good"
MiB = 1 << 20


@pytest.fixture(scope="module")
def chemnitz():
    import coc.testbed

    with coc.testbed.up("chemnitz-2003", name=f"np-chem-{os.getpid()}") as bed:
        yield bed


def _peers(rank):
    return {remote for _, remote in rank["connections"]}


def test_4mib_athlon_to_xeon_crosses_myrinet_then_sci(chemnitz):
    bed = chemnitz
    ranks, gateways = measure("chemnitz-2003", bed.name, "athlon1", "xeon3", 4 * MiB, reps=2)
    assert [r["host"] for r in ranks] == ["athlon1", "xeon3"]
    # athlon1 talks only to xeon8, on Myrinet; xeon3 only to xeon8, on the Xeon SCI ring
    assert _peers(ranks[0]) == {bed.address("xeon8", "myrinet")}
    assert {local for local, _ in ranks[0]["connections"]} == {bed.address("athlon1", "myrinet")}
    assert _peers(ranks[1]) == {bed.address("xeon8", "xeon-sci")}
    assert gateways["xeon8"]["stats"]["bytes_forwarded"] >= 2 * 3 * 4 * MiB   # there and back


def test_slow_gateway_small_direct_large_through_it(chemnitz):
    """The model sends small messages straight over Fast Ethernet, large ones via xeon8."""
    topology, bed = GOOD / "chemnitz-slow-gateway.yaml", chemnitz
    ranks, gateways = measure(topology, bed.name, "athlon1", "xeon3", 8, reps=3)
    assert bed.address("xeon3", "admin") in _peers(ranks[0])          # direct, admin network
    assert gateways["xeon8"]["stats"]["frames_forwarded"] == 0
    ranks, gateways = measure(topology, bed.name, "athlon1", "xeon3", 4 * MiB, reps=2)
    assert _peers(ranks[0]) == {bed.address("xeon3", "admin"),         # envelopes
                                bed.address("xeon8", "myrinet")}       # the bytes
    assert gateways["xeon8"]["stats"]["bytes_forwarded"] >= 2 * 3 * 4 * MiB


def _half_round_trip(topology, bed, *delays):
    ranks, _ = measure(topology, bed.name, "a1", "b1", 8, reps=5, delays=delays)
    return statistics.median(ranks[0]["halves"])


def test_declared_wan_latency_is_emulated(two_sites_testbed):
    """two-sites-10ms declares 10 ms on the WAN: a1 -> b1 takes at least that, not much more."""
    half = _half_round_trip(GOOD / "two-sites-10ms.yaml", two_sites_testbed)
    assert 10e-3 <= half < 10e-3 * 2                                 # model: 10.06 ms


def test_delay_sweep(two_sites_testbed):
    for delay in (0, 1e-3, 10e-3, 50e-3):
        text = "0" if delay == 0 else f"{delay * 1e3:g}ms"
        half = _half_round_trip("two-sites", two_sites_testbed, f"wan={text}")
        assert delay <= half < delay + 0.1, (text, half)


def test_bench_verify_prints_model_and_measured(two_sites_testbed):
    rows = verify("two-sites", two_sites_testbed.name, {"small": 8, "large": 64 << 10}, reps=2)
    assert [(r["from"], r["to"], r["class"]) for r in rows] == [
        ("a1", "b1", "small"), ("a1", "b1", "large"), ("b1", "a1", "small"),
        ("b1", "a1", "large")]
    assert all(r["median"] > 0 and r["ratio"] > 0 for r in rows)
    table = format_table(rows)
    assert "a1 > a-gw > b-gw > b1 (a-lan+wan+b-lan)" in table and "ratio" in table
