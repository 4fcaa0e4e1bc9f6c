"""coc-run end to end on the local spawner: ranks start, see their identity, and end cleanly."""

import json
import os
import time

import pytest


from launcher_helpers import assert_all_gone, program, recorded_pids
from hang_bounds import read_line, scaled


@pytest.mark.parametrize("n", [1, 2, 8])
def test_ranks_start_on_both_sites_and_see_their_identity(coc_run, n):
    result = coc_run("-n", n, program("show_env.py"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""                       # nothing of coc-run's own on a clean run
    envs = sorted((json.loads(line) for line in result.stdout.splitlines()),
                  key=lambda e: int(e["COC_RANK"]))
    assert [int(e["COC_RANK"]) for e in envs] == list(range(n))
    assert {e["COC_SIZE"] for e in envs} == {str(n)} == {e["PMI_SIZE"] for e in envs}
    assert all(e["PMI_RANK"] == e["COC_RANK"] for e in envs)
    assert len({e["COC_JOB_ID"] for e in envs}) == 1
    assert all(e["COC_TOPOLOGY"].endswith("two-sites.yaml") for e in envs)
    assert all("COC_CONTROL_FD" in e for e in envs)
    sites = [e["COC_SITE"] for e in envs]
    assert sites == sorted(sites)                         # ranks numbered site by site
    assert set(sites) == ({"a"} if n == 1 else {"a", "b"})  # spread over both sites
    for e in envs:
        on_host = [x for x in envs if x["COC_HOST"] == e["COC_HOST"]]
        assert e["COC_LOCAL_SIZE"] == str(len(on_host))
        assert int(e["COC_LOCAL_RANK"]) == on_host.index(e)


def test_site_counts_and_exported_variables(coc_run, monkeypatch):
    result = coc_run("--site", "b=3", "--site", "a=1", "-x", "TEST_SET=given", "-x",
                     "TEST_FROM_ENV", program("show_env.py"), env={"TEST_FROM_ENV": "inherited"})
    assert result.returncode == 0, result.stderr
    envs = {int(e["COC_RANK"]): e for e in map(json.loads, result.stdout.splitlines())}
    assert [envs[r]["COC_SITE"] for r in range(4)] == ["b", "b", "b", "a"]
    assert [envs[r]["COC_HOST"] for r in range(4)] == ["b1", "b1", "b2", "a1"]
    assert {e["TEST_SET"] for e in envs.values()} == {"given"}
    assert {e["TEST_FROM_ENV"] for e in envs.values()} == {"inherited"}


def test_tag_output_never_puts_a_prefix_inside_a_line(coc_run):
    result = coc_run("-n", 4, "--tag-output", program("partial.py"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4 * 6
    hosts = {"0": "a/a1", "1": "a/a1", "2": "b/b1", "3": "b/b1"}
    for rank, host in hosts.items():
        prefix = f"[{host}/{rank}] "
        mine = [line for line in lines if line.startswith(prefix)]
        assert mine == [f"{prefix}r{rank}-line{i}-pieces" for i in range(5)] + \
                       [f"{prefix}r{rank}-tail-without-newline"]
    assert result.stdout.endswith("\n")


def test_output_dir_gets_one_file_per_rank_and_stream(coc_run, tmp_path):
    result = coc_run("-n", 3, "--output-dir", tmp_path / "out", "sh", "-c",
                     "echo out $COC_RANK; echo err $COC_RANK >&2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    for rank in range(3):
        assert (tmp_path / "out" / f"rank.{rank}.stdout").read_text() == f"out {rank}\n"
        assert (tmp_path / "out" / f"rank.{rank}.stderr").read_text() == f"err {rank}\n"


def test_any_executable_runs_and_a_missing_one_fails_with_127(coc_run):
    for _ in range(3):     # ranks that end without reading their welcome leave no noise
        result = coc_run("-n", 8, "echo", "plain")
        assert (result.returncode, result.stdout, result.stderr) == (0, "plain\n" * 8, "")
    result = coc_run("-n", 2, "no-such-program-here")
    assert result.returncode == 127
    assert "cannot execute 'no-such-program-here'" in result.stderr
    assert "exited with code 127" in result.stderr


def test_module_programs_run_under_python_m_coc(coc_run):
    result = coc_run("-n", 2, "-m", "json.tool", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("usage:") == 2


def test_rendezvous_hands_out_keys_peers_and_routes(coc_run):
    result = coc_run("-n", 3, program("rendezvous.py"))
    assert result.returncode == 0, result.stderr
    answers = sorted(map(json.loads, result.stdout.splitlines()), key=lambda a: a["rank"])
    assert [a["self_id"] for a in answers] == [0, 1, 2]
    assert {tuple(map(tuple, a["placement"])) for a in answers} == \
        {(("a", "a1"), ("a", "a1"), ("b", "b1"))}
    assert {a["size"] for a in answers} == {3}
    # no secret: one key per direct peer (ranks 0, 1 share a host; gateways 3 (a), 4 (b)),
    # the same at both ends of a pair, different for every pair
    assert all("secret" not in a for a in answers)
    assert {a["rank"]: sorted(map(int, a["keys"])) for a in answers} == \
        {0: [1, 3], 1: [0, 3], 2: [4]}
    assert answers[0]["keys"]["1"] == answers[1]["keys"]["0"] == [answers[0]["keys"]["1"][0],
                                                                  False]
    assert answers[0]["keys"]["3"][1] is True
    assert len({k for a in answers for k, _ in a["keys"].values()}) == 4
    for a in answers:                     # every other endpoint; ids from 3 are gateways
        assert {k: v for k, v in a["peers"].items() if int(k) < 3} == \
            {str(r): f"tcp://127.0.0.1:{20000 + r}" for r in range(3) if r != a["rank"]}
    for a in answers:
        assert set(a["routes"]) == {str(r) for r in range(3) if r != a["rank"]}
    # ranks 0 and 1 share host a1: their route to each other is direct
    assert answers[0]["routes"]["1"] == {"small": [[1, 1]], "large": [[1, 1]]}


def test_real_engines_pass_a_ring_message_across_sites_through_gateway_daemons(coc_run,
                                                                               tmp_path):
    result = coc_run("-n", 4, "--output-dir", tmp_path / "out", program("engine_ring.py"))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    answers = {r: json.loads((out / f"rank.{r}.stdout").read_text()) for r in range(4)}
    assert {r: a["got"] for r, a in answers.items()} == \
        {r: f"hello from {(r - 1) % 4}" for r in range(4)}
    # ranks 0, 1 on site a; 2, 3 on site b; a-gw is endpoint 4, b-gw endpoint 5
    both = lambda hops: {"small": hops, "large": hops}  # noqa: E731 (one route, both classes)
    assert answers[1]["routes"] == {"0": both([[0, 1]]), "2": both([[4, 1000]]),
                                    "3": both([[4, 1000]])}
    assert answers[2]["routes"]["1"] == both([[5, 1000]])
    # 1 -> 2 and 3 -> 0 cross sites: each gateway daemon forwarded exactly those two
    for gateway in ("a-gw", "b-gw"):
        final = json.loads((out / f"gateway.{gateway}.stdout").read_text())
        assert final["stats"]["frames_forwarded"] == 2, final
        assert "forwarding at tcp://127.0.0.1:" in (out / f"gateway.{gateway}.stderr").read_text()


def test_the_keys_are_in_no_command_line_and_no_environment(coc_run):
    result = coc_run("-n", 2, program("rendezvous.py"))
    assert result.returncode == 0, result.stderr
    for answer in map(json.loads, result.stdout.splitlines()):
        assert answer["leaks"] == []


def test_rank_exiting_nonzero_ends_the_job_with_its_code_and_no_orphans(coc_run, tmp_path):
    started = time.monotonic()
    result = coc_run("-n", 4, program("rank.py"), "--pid-dir", tmp_path, "--grandchild",
                     "--ignore-term", "--exit-rank", 2, "--code", 5)
    ended = time.time()
    assert result.returncode == 5
    assert "coc-run: rank 2 (site b, host b1) exited with code 5" in result.stderr
    assert ended - float((tmp_path / "failed-at").read_text()) < scaled(10)
    assert time.monotonic() - started < scaled(60)
    pids = recorded_pids(tmp_path)
    assert len(pids) == 4 * 2 + 2          # ranks, grandchildren, two agents
    assert_all_gone(pids)


def test_rank_killed_by_a_signal_ends_the_job_with_128_plus_signal(coc_run, tmp_path):
    result = coc_run("-n", 3, program("rank.py"), "--pid-dir", tmp_path, "--grandchild",
                     "--kill-rank", 0)
    assert result.returncode == 128 + 9
    assert "rank 0 (site a, host a1) was killed by signal 9 (SIGKILL)" in result.stderr
    assert_all_gone(recorded_pids(tmp_path))


def test_unhandled_exception_in_one_rank_aborts_ranks_blocked_on_stdin(coc_run, tmp_path):
    r, w = os.pipe()                       # rank 0 reads coc-run's stdin, which stays open
    try:
        result = coc_run("-n", 2, program("rank.py"), "--pid-dir", tmp_path, "--raise-rank", 1,
                         "--stay", "stdin", stdin=r, timeout=scaled(30))
    finally:
        os.close(r)
        os.close(w)
    ended = time.time()
    assert result.returncode == 1
    assert "[rank 1 (site b, host b1)] RuntimeError: rank 1 gives up" in result.stderr
    assert "[rank 1 (site b, host b1)] unhandled exception, aborting the job" in result.stderr
    assert "runpy" not in result.stderr
    assert "coc-run: rank 1 (site b, host b1) exited with code 1" in result.stderr
    assert ended - float((tmp_path / "failed-at").read_text()) < scaled(10)
    assert_all_gone(recorded_pids(tmp_path))


def test_stdin_reaches_rank_0_only(coc_run):
    result = coc_run("-n", 2, "sh", "-c", 'read line; echo "$COC_RANK got [$line]"',
                     stdin=None, input="hello\n")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0 got [hello]", "1 got []"]


def test_timeout_stops_the_job_with_124(coc_run, tmp_path):
    started = time.monotonic()
    result = coc_run("-n", 4, "--timeout", 1, program("rank.py"), "--pid-dir", tmp_path,
                     "--ignore-term", "--grandchild")
    assert result.returncode == 124
    assert "coc-run: timeout after 1 s" in result.stderr
    assert time.monotonic() - started < scaled(60)
    assert_all_gone(recorded_pids(tmp_path))


def test_a_reader_that_stops_early_does_not_hang_the_job(tmp_path):
    import subprocess

    from launcher_helpers import COC_RUN

    proc = subprocess.Popen([*COC_RUN, "-n", "2", "sh", "-c", "seq 1 200000"], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert read_line(proc, 30) == b"1\n"
    proc.stdout.close()                        # like `coc-run ... | head -1`
    try:
        assert proc.wait(timeout=scaled(20)) == 0
    finally:
        proc.kill()
        proc.stderr.close()


def test_large_stdin_flows_to_rank_0_while_the_others_finish(coc_run, tmp_path):
    big = tmp_path / "big"
    big.write_bytes(bytes(range(256)) * 20000)              # 5 MB, far beyond pipe buffers
    with open(big, "rb") as stdin:
        result = coc_run("-n", 3, "sh", "-c",
                         'if [ $COC_RANK = 0 ]; then sleep 0.5; wc -c; else echo other; fi',
                         stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == ["5120000", "other", "other"]
