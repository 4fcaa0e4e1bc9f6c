"""coc-run's watchdog: a job that stops moving while operations wait is diagnosed, not endured.

Every ``interval`` seconds :class:`Watchdog` asks every site agent for the status of its
processes (``status`` control message): each rank answers with its *progress* (the
operations its engine has completed), its *pending* operations (source or destination,
tag, size, communicator) and its engine's latest log lines; each gateway daemon with its
engine stats (bytes forwarded, bytes waiting in its forward queues). When the sum of all
progress counters has not changed for ``seconds`` while some rank has an operation pending
(or stopped answering while it had one), coc-run prints one report on stderr — every rank with what it waits for and what its engine logged
last, every gateway with the bytes it holds, each line tagged ``[site/host/rank]`` — and
the job goes on (or, with ``abort``, is stopped with status :data:`ABORT_STATUS`). A job
that moves again and stalls again is reported again.

Progress is completed operations, not bytes: frames sent again and again (a failover that
never settles) move bytes through ranks and gateways without completing anything, and
must not hide the stall. The price: one transfer that takes longer than ``seconds`` by
itself is reported too (the job goes on unless ``abort``).
"""

import asyncio
import sys
import time

__all__ = ["Watchdog", "DEFAULT_SECONDS", "ABORT_STATUS", "interval_for", "format_report"]

#: Seconds without progress before the report when ``--watchdog`` is not given.
DEFAULT_SECONDS = 60.0
#: coc-run's exit status when ``--watchdog-abort`` stops a job.
ABORT_STATUS = 125


def interval_for(seconds):
    """Return how often to ask for status: a tenth of the bound, within [0.25, 5] s.

    Examples
    --------
    >>> interval_for(60), interval_for(1), interval_for(600)
    (5.0, 0.25, 5.0)
    """
    return min(max(seconds / 10, 0.25), 5.0)


def _operation(op):
    """Return one pending operation in words.

    Examples
    --------
    >>> _operation({"op": "recv", "peer": -1, "tag": 5, "size": 8, "comm": "COMM_WORLD"})
    'receive from any rank, tag 5, buffer 8 bytes, COMM_WORLD'
    """
    peer = "any rank" if op["peer"] < 0 else f"rank {op['peer']}"
    tag = "any tag" if op["tag"] < 0 else f"tag {op['tag']}"
    if op["op"] == "send":
        return f"send to {peer}, {tag}, {op['size']} bytes, {op.get('comm', '?')}"
    return f"receive from {peer}, {tag}, buffer {op['size']} bytes, {op.get('comm', '?')}"


def _rank_lines(where, answer):
    """Return a rank's report lines: one per pending operation, or why there is none; then
    what its engine logged last (connections lost, routes moved), indented."""
    if answer is None:
        return [f"{where} no answer (stopped, or busy without releasing the GIL)"]
    if not answer.get("pending"):
        return [f"{where} " + ("finalized" if answer.get("finalized") else "nothing pending")]
    return ([f"{where} waits in {_operation(op)}" for op in answer["pending"]] +
            [f"      engine: {line}" for line in answer.get("log", [])])


def _gateway_line(where, stats):
    """Return a gateway daemon's report line: the bytes its forward queues hold."""
    if stats is None:
        return f"{where} no answer"
    return (f"{where} {stats['forward_bytes_buffered']} bytes buffered in its forward queues, "
            f"{stats['connections_open']} open connection(s)")


def format_report(plan, idle, ranks, gateways):
    """Return the report's text: a headline, then one tagged line per rank and gateway.

    ``ranks`` maps a rank to its last status answer (None: it did not answer), ``gateways``
    a gateway endpoint to its engine stats (None: no answer). Peers of pending operations
    are endpoint ids: ranks below the job's size, gateway daemons above.
    """
    lines = [f"coc-run: watchdog: no progress anywhere for {idle:.0f} s (no operation "
             "completed) while operations are pending:"]
    for p in plan.placements:
        if p.rank in ranks:
            lines += _rank_lines(f"  [{p.site}/{p.host}/{p.rank}] rank {p.rank}:", ranks[p.rank])
    for g in plan.gateways:
        if g.endpoint in gateways:
            lines.append(_gateway_line(f"  [{g.site}/{g.host}/gateway] gateway daemon:",
                                       gateways[g.endpoint]))
    return "\n".join(lines) + "\n"


class Watchdog:
    """Follow a job's progress through status answers; report (or stop) a stalled job.

    Parameters
    ----------
    job : coc.launcher.control.Job
        The job; needs ``plan``, ``broadcast(message)`` and ``fail(status, message)``.
    seconds : float
        Seconds without progress, while operations are pending, before the report.
    abort : bool
        Stop the job after the report (exit status :data:`ABORT_STATUS`).
    """

    def __init__(self, job, seconds, *, abort=False, stream=None, clock=time.monotonic):
        self.job, self.seconds, self.abort = job, seconds, abort
        self.stream = stream or sys.stderr
        self.clock = clock
        self.interval = interval_for(seconds)
        self.ranks, self.gateways = {}, {}   # last answer of each process still running
        self.answered = {}                   # each rank's last answer that was not None
        self.progress = None                 # the sum of progress counters last seen
        self.since = clock()                 # when it last changed
        self.reported = False
        self.round = 0

    async def run(self):
        """Ask for status every interval and check the answers, until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.check()
            self.round += 1
            self.job.broadcast({"type": "status", "id": self.round,
                                "timeout": min(self.interval, 1.0)})

    def update(self, message):
        """Take one agent's status answer (a site, or one host of a site)."""
        for rank, answer in message.get("ranks", {}).items():
            self.ranks[int(rank)] = answer
            if answer is not None:
                self.answered[int(rank)] = answer
        for gateway, stats in message.get("gateways", {}).items():
            self.gateways[int(gateway)] = stats

    def forget(self, source):
        """Drop a process that has exited (``("rank", 3)`` or ``("gateway", 16)``)."""
        (self.ranks if source[0] == "rank" else self.gateways).pop(source[1], None)
        if source[0] == "rank":
            self.answered.pop(source[1], None)

    def check(self):
        """Report (once per stall) when nothing moved for ``seconds`` with operations pending."""
        now = self.clock()
        # a rank that stopped answering counts as what it last said (silence is no
        # progress): one that went silent in a wait is stuck or stopped there, one that
        # went silent computing computes
        said = [a or self.answered.get(r) or {} for r, a in self.ranks.items()]
        total = sum(a.get("progress", 0) for a in said)
        if total != self.progress:
            self.progress, self.since, self.reported = total, now, False
            return
        waiting = any(a.get("pending") for a in said)
        if not waiting:
            self.since = now                 # computing is not a hang
            return
        if self.reported or now - self.since < self.seconds:
            return
        self.reported = True
        self.stream.write(format_report(self.job.plan, now - self.since, self.ranks,
                                        self.gateways))
        self.stream.flush()
        if self.abort:
            self.job.fail(ABORT_STATUS, f"coc-run: watchdog: job stopped after "
                                        f"{now - self.since:.0f} s without progress")
