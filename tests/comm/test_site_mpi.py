"""The site's own MPI inside a site, with real MPICH: mpiexec starts two 'sites' of 2 ranks.

``COC_SITE_MPI=1`` and a plain ``mpiexec`` (no coc-run): coc builds the job from MPI, ranks
of one site talk through MPICH, ranks of different sites through the engine. The same rank
programs as the coc-run tests check p2p (ANY_SOURCE sees both), collectives, communicators
and asyncio.
"""

import json
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec

import pytest
from comm_helpers import PROGRAMS, assert_clean
from hypothesis import HealthCheck, example, given, settings
from test_ordering import patterns
from hang_bounds import scaled

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(find_spec("mpi4py") is None or shutil.which("mpiexec") is None,
                       reason="needs mpi4py and MPICH's mpiexec (pip install mpich mpi4py)"),
]


def run_mpiexec(program, *args, per_site=2, timeout=scaled(60)):
    """Run ``program`` as sites a and b of ``per_site`` ranks each; return the reports."""
    side = [sys.executable, str(PROGRAMS / program), *map(str, args)]
    cmd = [shutil.which("mpiexec"), "-n", str(per_site), "-env", "COC_SITE", "a", *side, ":",
           "-n", str(per_site), "-env", "COC_SITE", "b", *side]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COC_")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**env, "COC_SITE_MPI": "1"}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {}
    for line in proc.stdout.replace("}{", "}\n{").splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            reports[report["rank"]] = report
    assert sorted(reports) == list(range(2 * per_site)), proc.stdout + proc.stderr
    return reports


@pytest.mark.parametrize("program", ["p2p_obj.py", "p2p_buf.py", "coll_obj.py",
                                     "coll_buf.py", "comm.py", "aio.py"])
def test_programs_pass_with_the_site_mpi(program):
    reports = run_mpiexec(program)
    assert_clean(reports)
    for report in reports.values():
        stats = report["stats"]
        assert stats["site_mpi_messages"] > 0, stats          # some went through MPICH
        assert stats["messages"] > stats["site_mpi_messages"], stats   # some through the engine
        assert stats["inter_site_messages"] > 0, stats


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns)
# Rank 2 sends two objects to itself through MPICH; its posted ANY_SOURCE receives, waited
# for newest first, once took them in the wrong order (a message arrived between the probes
# of two pending receives and went to the newer one).
@example(pattern={"messages": [(0, 0, 0, 0, "obj")] * 9 + [(2, 2, 0, 0, "obj")] * 2,
                  "receive": {"0": "any", "1": "any", "2": "posted", "3": "any"}})
def test_random_patterns_keep_mpi_order_across_both_transports(tmp_path, pattern):
    """ANY_SOURCE receives see messages from MPICH (same site) and the engine (other site)."""
    path = tmp_path / "pattern.json"
    path.write_text(json.dumps(pattern))
    assert_clean(run_mpiexec("ordering.py", path))
