"""coc bench on the two-sites testbed: ranks in network namespaces, sites joined by gateways."""

import json
import os

import pytest


pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: coc-run --testbed runs "
                                 "ranks in network namespaces (CI runs these as root)")]


def test_quick_pingpong_on_the_testbed(two_sites_testbed, job, tmp_path):
    bed = two_sites_testbed
    placement = ["--testbed", bed.name, "--host", "a1", "--host", "a2:1", "--host", "b1:1",
                 "-n", "4"]
    res = job("coc-run", ["PingPong", "Empty", "--quick", "--no-plots", "--out", "out"],
              launcher_args=placement)
    assert res.returncode == 0, res.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["meta"]["locations"] == [["a", "a1"], ["a", "a1"], ["a", "a2"], ["b", "b1"]]
    rows = {(s["class"], s["what"], s["size"]): s for s in results["stats"]
            if s["pattern"] == "PingPong"}
    assert {c for c, _, _ in rows} == {"host", "site", "wan"}
    assert all(r["n"] > 0 for r in rows.values())
    # the offset is known to within half the smallest round trip across the sites: under
    # --testbed two-sites' declared 1 ms WAN latency is emulated, so about 1 ms; 5 ms catches
    # a clock that was not synchronised at all (offsets between hosts are not bounded then)
    assert results["meta"]["clock"]["accuracy_ns"] < 5e6
