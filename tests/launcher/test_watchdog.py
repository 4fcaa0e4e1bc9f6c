"""coc-run's watchdog: a real hang is reported (ranks, what they wait for, gateway queues)."""

import io

from coc import topology
from coc.launcher.plan import make_plan
from coc.launcher.watchdog import ABORT_STATUS, Watchdog
from launcher_helpers import program


class _Job:
    def __init__(self, plan):
        self.plan, self.failed = plan, None

    def fail(self, status, message):
        self.failed = (status, message)


def _watchdog(abort=False):
    plan = make_plan(topology.load("two-sites"), ["prog"], site_counts=[("a", 1), ("b", 1)])
    clock = [0.0]
    dog = Watchdog(_Job(plan), 10, abort=abort, stream=io.StringIO(), clock=lambda: clock[0])
    return dog, clock


def _answer(progress, *pending, log=()):
    return {"progress": progress, "log": list(log), "pending": [
        {"op": "recv", "peer": peer, "tag": 7, "size": 32, "comm": "COMM_WORLD (buffers)"}
        for peer in pending]}


def test_a_stall_with_pending_operations_is_reported_once_and_again_after_progress():
    dog, clock = _watchdog()
    gateway = dog.job.plan.gateways[0]
    stats = {"bytes_forwarded": 5, "forward_bytes_buffered": 4096, "connections_open": 2}
    lost = "gateway 9 lost (closed): 1 destination moved to the other gateways"
    dog.update({"ranks": {"0": _answer(100, 1, log=[lost]), "1": _answer(50, 0)},
                "gateways": {str(gateway.endpoint): stats}})
    dog.check()
    clock[0] = 9.0
    dog.check()
    assert dog.stream.getvalue() == ""
    clock[0] = 10.5
    dog.check()
    report = dog.stream.getvalue()
    assert "no progress anywhere for 10 s" in report
    assert "[a/a1/0] rank 0: waits in receive from rank 1, tag 7, buffer 32 bytes" in report
    assert "[b/b1/1] rank 1: waits in receive from rank 0, tag 7" in report
    assert f"buffer 32 bytes, COMM_WORLD (buffers)\n      engine: {lost}\n  [b/b1/1]" in report
    where = f"[{gateway.site}/{gateway.host}/gateway]"
    assert f"{where} gateway daemon: 4096 bytes buffered" in report
    clock[0] = 30.0
    dog.check()
    assert dog.stream.getvalue() == report          # once per stall
    dog.update({"ranks": {"1": _answer(51, 0)}})
    dog.check()                                      # it moved: a new stall is a new report
    clock[0] = 41.0
    dog.check()
    assert dog.stream.getvalue().count("no progress anywhere") == 2
    assert dog.job.failed is None


def test_no_report_while_ranks_compute_and_abort_stops_the_job():
    dog, clock = _watchdog(abort=True)
    dog.update({"ranks": {"0": _answer(100), "1": None}})
    for clock[0] in (0.0, 20.0, 40.0):
        dog.check()
    assert dog.stream.getvalue() == ""
    dog.update({"ranks": {"0": _answer(100, 1)}})
    for clock[0] in (41.0, 52.0):
        dog.check()
    assert "[b/b1/1] rank 1: no answer" in dog.stream.getvalue()
    assert dog.job.failed[0] == ABORT_STATUS


def test_bytes_that_move_without_completing_anything_do_not_hide_a_stall():
    """Frames sent again and again (a failover that never settles) move the gateways' and
    ranks' byte counters; progress is completed operations, so the stall is reported."""
    dog, clock = _watchdog()
    gateway = dog.job.plan.gateways[0]
    for step in range(12):
        clock[0] = float(step)
        stats = {"bytes_forwarded": 1000 * step, "forward_bytes_buffered": 0,
                 "connections_open": 2}
        dog.update({"ranks": {"0": _answer(3, 1), "1": _answer(4, 0)},
                    "gateways": {str(gateway.endpoint): stats}})
        dog.check()
    assert "no progress anywhere for 10 s (no operation completed)" in dog.stream.getvalue()


def test_a_rank_that_stops_answering_in_a_wait_is_reported():
    """A rank that last said it waits and then no longer answers (stopped, or stuck with
    the GIL) is a stall, reported with what it waited for; one silent since it computed is
    not (test_no_report_while_ranks_compute_and_abort_stops_the_job)."""
    dog, clock = _watchdog()
    dog.update({"ranks": {"0": _answer(5), "1": _answer(5, 0)}})
    dog.check()
    dog.update({"ranks": {"0": _answer(5), "1": None}})
    for clock[0] in (5.0, 10.5):
        dog.check()
    assert "[b/b1/1] rank 1: no answer" in dog.stream.getvalue()


def _waits(coc_run, watchdog, mode, *options, args=()):
    """Run waits.py in ``mode`` on one rank per site under a watchdog of ``watchdog`` s."""
    return coc_run("--site", "a=1", "--site", "b=1", "--watchdog", watchdog, "--timeout", "60",
                   *options, program("waits.py"), "--mode", mode, *args, timeout=90)


def test_two_ranks_both_in_a_blocking_recv_are_reported_and_the_job_stopped(coc_run):
    done = _waits(coc_run, 1, "hang", "--watchdog-abort")
    assert done.returncode == ABORT_STATUS, done.stderr
    err = done.stderr
    assert "coc-run: watchdog: no progress anywhere for" in err
    assert "[a/a1/0] rank 0: waits in receive from rank 1, tag 7, buffer 32 bytes, " \
           "COMM_WORLD (buffers)" in err
    assert "[b/b1/1] rank 1: waits in receive from rank 0, tag 7, buffer 32 bytes, " \
           "COMM_WORLD (buffers)" in err
    assert err.count("gateway daemon: 0 bytes buffered in its forward queues") == 2
    assert "coc-run: watchdog: job stopped after" in err


def test_the_report_does_not_stop_a_job_that_moves_again(coc_run):
    done = _waits(coc_run, 1, "late", args=("--sleep", "8"))
    assert done.returncode == 0, done.stderr
    assert "[a/a1/0] rank 0: waits in receive from rank 1, tag 7" in done.stderr
    assert "[b/b1/1] rank 1: nothing pending" in done.stderr
    assert "received 42" in done.stdout


def test_a_stopped_receiver_shows_as_silent_and_the_gateway_queues_hold_bytes(coc_run):
    import re

    done = _waits(coc_run, 2, "flood", "--watchdog-abort")
    assert done.returncode == ABORT_STATUS, done.stderr
    err = done.stderr
    assert "[a/a1/0] rank 0: no answer" in err
    assert "[b/b1/1] rank 1: waits in send to rank 0, tag 3, 67108864 bytes" in err
    held = [int(n) for n in re.findall(r"gateway daemon: (\d+) bytes buffered", err)]
    assert len(held) == 2 and any(n > 0 for n in held), err
