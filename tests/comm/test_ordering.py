"""Message order under random patterns (hypothesis): one coc-run job per generated pattern."""

import json

import pytest
from comm_helpers import assert_clean, run_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hang_bounds import scaled

pytestmark = pytest.mark.timeout(180)

RANKS = 4
message = st.tuples(st.integers(0, RANKS - 1), st.integers(0, RANKS - 1), st.integers(0, 3),
                    st.sampled_from([0, 3, 5000, 70_000]), st.sampled_from(["obj", "buf"]))
patterns = st.fixed_dictionaries({
    "messages": st.lists(message, min_size=1, max_size=40),
    "receive": st.fixed_dictionaries({str(r): st.sampled_from(["any", "by_tag", "by_source", "posted"])
                                      for r in range(RANKS)}),
})


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns)
def test_random_patterns_keep_mpi_order(tmp_path, pattern):
    path = tmp_path / "pattern.json"
    path.write_text(json.dumps(pattern))
    _, reports = run_job("ordering.py", RANKS, path, timeout=scaled(40))
    assert_clean(reports)
