"""Endpoint identity in a real job: a rank cannot pass for another (issue 16, item 3)."""

import json
import subprocess

import pytest
from comm_helpers import COC_RUN, PROGRAMS, assert_clean

from hang_bounds import scaled

pytestmark = pytest.mark.timeout(180)


def _last_json(path):
    return json.loads(path.read_text().strip().splitlines()[-1])


def test_a_rank_cannot_pass_for_another_and_restricted_mode_refuses_its_pickle(tmp_path):
    marker, out = tmp_path / "the-pickle-ran", tmp_path / "out"
    proc = subprocess.run(
        [*COC_RUN, "-n", "4", "--output-dir", str(out), "--timeout", str(scaled(60)),
         str(PROGRAMS / "impersonate.py"), str(marker)],
        capture_output=True, text=True, timeout=scaled(60) + 60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    reports = {r: _last_json(out / f"rank.{r}.stdout") for r in range(4)}
    assert_clean(reports)
    assert not marker.exists()
    # site a's gateway refused both claims and says so: rank 3's id without its key, rank
    # 1's id while rank 1 is connected; site b's gateway never saw either. The second
    # claimant may dial again after a refusal: the gateway's proof reaches it before the
    # refusal (the proofs cross), so its connection looked open and then closed, and how
    # often that repeats depends on the machine's timing; each dial is refused.
    a_gw, b_gw = (_last_json(out / f"gateway.{g}.stdout")["stats"] for g in ("a-gw", "b-gw"))
    assert a_gw["auth_failures"] >= 1 and a_gw["duplicate_ids"] >= 1, a_gw
    assert b_gw["auth_failures"] == 0 and b_gw["duplicate_ids"] == 0, b_gw
    log = (out / "gateway.a-gw.stderr").read_text()
    attacker = reports[1]["pid"]
    assert f"endpoint 3 (unix from pid {attacker}) failed authentication" in log, log
    assert (f"endpoint 1 (unix from pid {attacker}) refused: endpoint 1 is connected already "
            f"(unix from pid {attacker})") in log, log
