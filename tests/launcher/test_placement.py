"""Placement and plans against golden files in tests/data/launcher (COC_UPDATE_GOLDEN=1)."""

import os
import warnings
from collections import Counter
from pathlib import Path

import pytest

from coc import topology
from coc.errors import TopologyWarning
from coc.launcher import placement
from coc.launcher.plan import format_plan, make_plan

GOLDEN = Path(__file__).parents[1] / "data" / "launcher"


def _load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        return topology.load(name)


def _check_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("COC_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with COC_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from its golden file"


def _describe(G, placements):
    lines = [f"{p.rank:>4} {p.site}/{p.host} local {p.local_rank}/{p.local_size}"
             for p in placements]
    lines.append(f"gateways: {' '.join(placement.place_gateways(G, placements)) or '-'}")
    return "\n".join(lines) + "\n"


CASES = {
    "two-sites-all": ("two-sites", {}),
    "two-sites-n1": ("two-sites", {"n": 1}),
    "two-sites-n5": ("two-sites", {"n": 5}),
    "two-sites-by-site": ("two-sites", {"requested": [("b", 3), ("a", 2)]}),
    "two-sites-hosts": ("two-sites", {"limits": [("a1", 1), ("a2", 1), ("b4", None)], "n": 4}),
    "two-sites-oversubscribed": ("two-sites", {"n": 20, "oversubscribe": True}),
    "chemnitz-2003-n6": ("chemnitz-2003", {"n": 6}),
    "private-pair-all": ("private-pair", {}),
    "uf-metacluster-n12": ("uf-metacluster", {"n": 12}),
    "bunyip-n8": ("bunyip", {"n": 8}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_placement_matches_golden(case):
    name, request = CASES[case]
    G = _load(name)
    available = placement.available_slots(G, request.get("limits"))
    counts = placement.site_counts(available, request.get("n"), request.get("requested"),
                                   request.get("oversubscribe", False))
    _check_golden(f"placement-{case}.txt", _describe(G, placement.place_ranks(available, counts)))


def test_dry_run_plan_matches_golden():
    G = _load("two-sites")
    plan = make_plan(G, ["./solver", "--steps", "10"], site_counts=[("a", 3), ("b", 2)],
                     exports={"OMP_NUM_THREADS": "1"}, job_id="golden", start_gateways=True)
    text = format_plan(plan).replace(G.graph["file"], "<two-sites.yaml>")
    _check_golden("plan-two-sites.txt", text)


def test_every_slot_is_used_once_before_any_is_used_twice():
    G = _load("two-sites")
    available = placement.available_slots(G)
    placements = placement.place_ranks(available, placement.site_counts(available, 18, None,
                                                                         True))
    per_host = Counter(p.host for p in placements)
    assert per_host == {**{h: 2 for h in topology.placement_slots(G)}, "a1": 3, "b1": 3}


def test_route_tables_of_a_plan_send_other_sites_through_gateway_daemons():
    G = _load("two-sites")
    plan = make_plan(G, ["true"], n=4, job_id="t", start_gateways=True)
    a_gw, b_gw = (g.endpoint for g in plan.gateways)
    assert [(g.host, g.endpoint) for g in plan.gateways] == [("a-gw", 4), ("b-gw", 5)]
    assert plan.route_table(0) == {1: [[1, 1]], 2: [[a_gw, 1000]], 3: [[a_gw, 1000]]}
    assert plan.route_table(a_gw)[2] == [[b_gw, 1000]]
    assert plan.route_table(b_gw)[2] == [[2, 1000]]
