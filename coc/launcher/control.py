"""``coc-run``'s side of the control plane: start the agents, follow the job, tear it down.

One :class:`Job` drives one run: it starts an agent per site through the site's spawner, sends
each its part of the job, relays output to an :class:`~coc.launcher.output.OutputSink`,
gathers the rendezvous addresses and answers every rank once all are in, and decides the
outcome. The first failure (a rank exiting non-zero or by a signal, a gateway daemon or an
agent dying, Ctrl-C, SIGTERM, the timeout) stops every process on every site: SIGTERM, then
SIGKILL after a grace period. A second Ctrl-C kills at once. A rank that exits normally is
announced to the others (``exited``), so a receive from it fails instead of waiting forever;
a :class:`~coc.launcher.watchdog.Watchdog` reports a job that stops moving.
"""

import asyncio
import contextlib
import os
import queue
import signal
import sys
import threading
import traceback

from coc import __version__
from coc.errors import CocError, LaunchError
from coc import protocol
from coc.launcher.failover import failover_report, gateway_loss
from coc.launcher.watchdog import Watchdog
from coc.pycommand import NO_COC

__all__ = ["Job", "TERM_GRACE", "HELLO_TIMEOUT", "describe_exit"]

#: Seconds between SIGTERM and SIGKILL when the job is stopped.
TERM_GRACE = 1.0
#: Seconds an agent has to say hello after its spawner started it.
HELLO_TIMEOUT = 30.0
#: Extra seconds coc-run waits for an agent past each escalation step before forcing it.
_AGENT_SLACK = 1.0


def describe_exit(code, signum):
    """Return ``(exit status, words)`` for a process's exit: shell conventions for signals.

    Examples
    --------
    >>> describe_exit(3, None)
    (3, 'exited with code 3')
    >>> describe_exit(None, 9)
    (137, 'was killed by signal 9 (SIGKILL)')
    """
    if signum is None:
        return code, f"exited with code {code}"
    try:
        name = f" ({signal.Signals(signum).name})"
    except ValueError:
        name = ""
    return 128 + signum, f"was killed by signal {signum}{name}"


class AgentLink:
    """``coc-run``'s end of one site's agent: its process and control channel."""

    def __init__(self, site, process):
        self.site, self.process = site, process
        self.done = False         # the agent said its processes are all gone
        self.finished = False     # its channel has closed and its process exited
        self.task = None

    def send(self, message):
        """Queue one message to the agent (ordered; a dead agent is noticed by the reader)."""
        if not self.process.stdin.is_closing():
            self.process.stdin.write(protocol.encode(message))

    def kill(self):
        """SIGKILL the agent and its process group (its ranks die with their agent)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()          # a spawner may not have made it a group leader


class Job:
    """Run one planned job on its sites and return the exit status ``coc-run`` reports.

    Parameters
    ----------
    plan : coc.launcher.plan.Plan
        What runs where.
    sink : coc.launcher.output.OutputSink
        Where the processes' output goes.
    secret : bytes
        The job's secret, sent to agents over their control channels only.
    watchdog : float, optional
        Seconds without progress anywhere, while operations are pending, before coc-run
        reports what every rank waits for (None or 0: no watchdog).
    watchdog_abort : bool
        Stop the job after that report.
    """

    def __init__(self, plan, sink, secret, *, grace=TERM_GRACE, hello_timeout=HELLO_TIMEOUT,
                 watchdog=None, watchdog_abort=False):
        self.plan, self.sink, self.secret = plan, sink, secret
        self.grace, self.hello_timeout = grace, hello_timeout
        self.agents = {}
        self.running = {("rank", p.rank) for p in plan.placements}
        self.running |= {("gateway", g.endpoint) for g in plan.gateways}
        self.addresses = {}
        self.ready = set()            # gateway daemons that have their peers
        self.linking = set()          # gateway daemons making their cross-site links
        self.launched = not plan.dials  # ranks started (held until the links are up)
        self.stdin_ack = queue.SimpleQueue()   # True: rank 0 took a chunk of stdin
        self.outcome = None           # (exit status, message) of what ended the job
        self.stopping = False
        self.interrupts = 0
        self.started = False
        self.ended = asyncio.Event()
        self.escalation = None
        self.watchdog = Watchdog(self, watchdog, abort=watchdog_abort) if watchdog else None

    # -- what ends a job ---------------------------------------------------------------------

    def fail(self, status, message):
        """Record the first reason the job ends early and stop everything."""
        if self.outcome is None:
            self.outcome = (status, message)
        self.stop()

    def stop(self):
        """Ask every agent to end its processes (SIGTERM, SIGKILL after the grace period)."""
        if self.stopping:
            return
        self.stopping = True
        for agent in self.agents.values():
            agent.send({"type": "stop"})
        self.escalation = asyncio.ensure_future(self._escalate(self.grace + _AGENT_SLACK))

    def kill(self):
        """End everything at once (second Ctrl-C)."""
        self.stopping = True
        for agent in self.agents.values():
            agent.send({"type": "kill"})
        if self.escalation is not None:
            self.escalation.cancel()
        self.escalation = asyncio.ensure_future(self._escalate(0))

    async def _escalate(self, delay):
        """Send ``kill`` after ``delay`` if agents are still there, then kill the agents."""
        await asyncio.sleep(delay)
        for agent in self.agents.values():
            agent.send({"type": "kill"})
        await asyncio.sleep(_AGENT_SLACK)
        for agent in self.agents.values():
            if agent.process.returncode is None:
                agent.kill()

    def interrupt(self, signum):
        """Handle SIGINT/SIGTERM: the first stops the job cleanly, a second kills it."""
        self.interrupts += 1
        if self.interrupts == 1:
            self.fail(128 + signum, f"coc-run: {signal.Signals(signum).name} received, "
                                    "job stopped")
        else:
            self.kill()

    # -- the run -------------------------------------------------------------------------------

    async def run(self, timeout=None):
        """Start the job, wait for its end (or ``timeout`` seconds) and return its status."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.interrupt, signum)
        begun = loop.time()
        try:
            try:
                await asyncio.wait_for(self.start(), timeout)
            except asyncio.TimeoutError:     # a site never came (a batch job still queued)
                self.fail(124, f"coc-run: timeout after {timeout:g} s before every site had "
                               "started (is a batch job still queued?), job stopped")
                return self._end()
            except CocError:
                self.stop()
                await self._wait_agents()
                raise
            if self.plan.placements and self.launched:
                self._forward_stdin(loop)
            watching = asyncio.ensure_future(self.watchdog.run()) if self.watchdog else None
            left = None if timeout is None else max(0.0, timeout - (loop.time() - begun))
            try:
                await asyncio.wait_for(asyncio.shield(self.ended.wait()), left)
            except asyncio.TimeoutError:
                self.fail(124, f"coc-run: timeout after {timeout:g} s, job stopped")
                await self.ended.wait()
            finally:
                if watching is not None:
                    watching.cancel()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            await self._wait_agents()
            self.sink.close()
        return self._end()

    def _end(self):
        """Print why the job ended (if it failed) and return coc-run's exit status."""
        status, message = self.outcome or (0, None)
        if message:
            print(message, file=sys.stderr, flush=True)
        return status

    async def start(self):
        """Start every site's agent at once; raise the first site's LaunchError, if any.

        No site gets its part of the job before every agent has said hello, so a site that
        cannot run coc stops the job before any rank starts.
        """
        results = await asyncio.gather(*(self._start_site(site) for site in self.plan.sites),
                                       return_exceptions=True)
        self.started = True
        for result in results:
            if isinstance(result, BaseException):
                raise result
        for site, agent in self.agents.items():
            agent.send(self.plan.agent_job(site, self.secret, self.grace))
            if self.stopping:            # stopped while the agents were starting
                agent.send({"type": "stop"})
        self._check_ended()

    async def _start_site(self, site):
        """Start one site's agent and wait for its hello."""
        spawner = self.plan.spawner(site)
        try:
            process = await spawner.start({})
        except OSError as exc:
            raise LaunchError(f"site unreachable: cannot start its agent: {exc}",
                              site=site) from None
        agent = self.agents[site] = AgentLink(site, process)
        await self._hello(agent)
        agent.task = asyncio.ensure_future(self._follow(agent))

    def _check_ended(self):
        if self.started and all(agent.finished for agent in self.agents.values()):
            self.ended.set()

    async def _hello(self, agent):
        """Return the agent's hello, or raise LaunchError saying why the site is unreachable."""
        try:
            hello = await asyncio.wait_for(protocol.read_message(agent.process.stdout),
                                           self.hello_timeout)
        except asyncio.TimeoutError:
            raise LaunchError(f"site unreachable: its agent did not answer within "
                              f"{self.hello_timeout:g} s", site=agent.site) from None
        spawner = self.plan.spawner(agent.site)
        if hello is None or hello["type"] != "hello":
            code = await agent.process.wait()
            if code == NO_COC:
                raise LaunchError(spawner.python_problem("cannot import coc"),
                                  site=agent.site, host=spawner.agent_where)
            raise LaunchError(f"site unreachable: its agent ended (exit code {code}) before "
                              "it said hello", site=agent.site)
        if hello.get("coc") != __version__:
            raise LaunchError(spawner.python_problem(
                f"imports coc {hello.get('coc', '(unknown)')}, this coc-run is {__version__}"),
                site=agent.site, host=hello.get("hostname"))
        return hello

    async def _follow(self, agent):
        """Handle one agent's messages until its channel closes."""
        try:
            while (message := await protocol.read_message(agent.process.stdout)) is not None:
                self.handle(agent, message)
        except CocError as exc:
            self.fail(1, f"coc-run: site {agent.site}: broken control channel: {exc}")
            agent.kill()
        except Exception as exc:  # noqa: BLE001 - a bug here must end the job, not hang it
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.fail(1, f"coc-run: internal error following site {agent.site}:\n{text}")
            agent.kill()
        code = await agent.process.wait()
        if not agent.done:
            lost = [source for source in self.running
                    if self.plan.site_of(source) == agent.site]
            self.running.difference_update(lost)
            self.fail(1, f"coc-run: site {agent.site}: its agent died (exit code {code}), "
                         "job stopped")
        agent.finished = True
        self._check_ended()

    async def _wait_agents(self):
        """Wait until every agent process has exited (escalation guarantees it ends)."""
        if self.agents and not self.stopping:
            self.stop()
        for agent in self.agents.values():
            await agent.process.wait()
            if agent.task is not None:
                await agent.task
        if self.escalation is not None:
            self.escalation.cancel()

    def broadcast(self, message):
        """Send ``message`` to every site's agent (not while the job is being stopped)."""
        if not self.stopping:
            for agent in self.agents.values():
                agent.send(message)

    # -- messages from agents ----------------------------------------------------------------

    def handle(self, agent, message):
        """Act on one message from ``agent``."""
        kind = message["type"]
        source = ("rank", message["rank"]) if "rank" in message else \
            ("gateway", message["gateway"]) if "gateway" in message else None
        if kind == "output":
            self.sink.write(source, message["stream"], protocol.unpack_bytes(message["data"]))
        elif kind == "exit":
            self.sink.end(source)
            self.exited(source, message["code"], message["signal"], message.get("log", ()))
        elif kind == "address":
            self.addresses[source] = message["address"]
            if not self.launched and not self.linking and len(self.addresses) == len(
                    self.plan.gateways):
                self.link_gateways()
            elif len(self.addresses) == len(self.plan.placements) + len(self.plan.gateways):
                self.update_gateways()
        elif kind == "ready" and source in self.linking:
            self.linking.discard(source)
            if not self.linking:
                self.launched = True
                self.broadcast({"type": "launch"})
                if self.plan.placements and not self.stopping:   # stdin follows the ranks
                    self._forward_stdin(asyncio.get_running_loop())
        elif kind == "ready":
            self.ready.add(source)
            if len(self.ready) == len(self.plan.gateways):
                self.answer_rendezvous()
        elif kind == "error" and message.get("failover"):
            print(failover_report(self.plan, source[1], message["message"]), file=sys.stderr,
                  flush=True)
        elif kind == "error":
            where = f" {source[0]} {source[1]}" if source else ""
            text = f"coc-run: site {agent.site}{where}: {message['message']}"
            if source in self.linking:
                text = self._link_failure(source, message["message"])
            if message.get("fatal"):
                self.fail(1, text)
            else:
                print(text, file=sys.stderr, flush=True)
        elif kind == "status":
            if self.watchdog is not None:
                self.watchdog.update(message)
        elif kind == "stdin-ack":
            self.stdin_ack.put(not message.get("closed"))
        elif kind == "done":
            agent.done = True
        else:
            print(f"coc-run: site {agent.site}: unexpected message {kind!r} from its agent",
                  file=sys.stderr, flush=True)

    def exited(self, source, code, signum, log=()):
        """Note that a rank or gateway daemon ended; the first failure stops the job.

        A gateway daemon that ends while ranks run is a failure whatever its code; its last
        log lines (``log``) go into the message.
        """
        self.running.discard(source)
        if self.watchdog is not None:
            self.watchdog.forget(source)
        status, words = describe_exit(code, signum)
        if self.stopping:
            pass
        elif source[0] == "rank" and status == 0:
            self.broadcast({"type": "exited", "rank": source[1]})
        elif source[0] == "rank" and status != 0:
            p = self.plan.placements[source[1]]
            self.fail(status, f"coc-run: rank {p.rank} (site {p.site}, host {p.host}) {words}")
        elif source[0] == "gateway":
            running = {ident for kind, ident in self.running if kind == "gateway"}
            verdict = gateway_loss(self.plan, source[1], words, running)
            tail = "".join(f"\n  {line}" for line in log)
            if verdict.fatal:
                self.fail(status or 1, "\n".join(verdict.lines) + tail)
            else:  # the engines route around it (failover)
                print("\n".join(verdict.lines) + tail, file=sys.stderr, flush=True)
        if not any(kind == "rank" for kind, _ in self.running):
            self.stop()

    def _peers(self):
        return {self.plan.endpoint(source): address for source, address in self.addresses.items()}

    def link_gateways(self):
        """Have gateway daemons make their cross-site links before any rank starts.

        Each dialing daemon (:attr:`~coc.launcher.plan.Plan.dials`) gets its peers' addresses,
        connects and answers once every link is up; then ``launch`` starts the ranks. A link
        that cannot be made ends the job here, naming it (never a hang: the daemon's wait
        is bounded).
        """
        peers = self._peers()
        self.linking = {("gateway", g) for g in self.plan.dials}
        for site, agent in self.agents.items():
            updates = {g: {"peers": {p: address for p, address
                                     in self.plan.peers_for(g, peers).items()
                                     if p in self.plan.dials[g]},
                           "dial": self.plan.dials[g]}
                       for g in self.plan.dials if self.plan.site_of_endpoint(g) == site}
            if updates:
                agent.send({"type": "gateways", "updates": updates})

    def _link_failure(self, source, said):
        """Return coc-run's message for a gateway daemon that could not make a link."""
        dialer = source[1]
        peers = self.plan.dials[dialer]
        named = next((p for p in peers if f"endpoint {p} " in said), peers[0])
        link = self.plan.describe_link(dialer, named)
        fix = f"open the port range on {self.plan.host_of(named)} to {self.plan.host_of(dialer)}"
        if not self.plan.outbound_only(dialer):
            fix += (f", or mark site {self.plan.site_of_endpoint(named)} outbound_only in the "
                    "topology (its gateway then dials out)")
        return (f"coc-run: the link {link} cannot be made, no rank was started: {said}\n"
                f"coc-run: {fix}")

    def update_gateways(self):
        """Give every gateway daemon its peers; ranks are answered once all are ready."""
        if not self.plan.gateways:
            self.answer_rendezvous()
            return
        peers = self._peers()
        for site, agent in self.agents.items():
            agent.send({"type": "gateways", "updates": {
                g.endpoint: {"peers": self.plan.peers_for(g.endpoint, peers)}
                for g in self.plan.gateways if g.site == site}})

    def answer_rendezvous(self):
        """Send every rank its peers and route table, through its site's agent."""
        peers = self._peers()
        for site, agent in self.agents.items():
            agent.send({"type": "rendezvous", "answers": {
                p.rank: self.plan.rendezvous_answer(p.rank, peers)
                for p in self.plan.placements if p.site == site}})

    # -- stdin ------------------------------------------------------------------------------------

    def _forward_stdin(self, loop):
        """Forward coc-run's stdin to rank 0 from a daemon thread (any kind of fd works).

        One chunk is in flight at a time: the thread reads the next only when the agent has
        written the last to the rank (``stdin-ack``), so memory stays bounded.
        """
        agent = self.agents[self.plan.placements[0].site]

        def deliver(data):
            agent.send({"type": "stdin", "data": protocol.pack_bytes(data)} if data
                       else {"type": "stdin"})

        def read():
            while True:
                try:
                    data = os.read(0, 1 << 16)
                except OSError:
                    data = b""
                try:
                    loop.call_soon_threadsafe(deliver, data)
                except RuntimeError:      # the loop has closed: coc-run is exiting
                    return
                if not data or not self.stdin_ack.get():
                    return

        threading.Thread(target=read, name="coc-run stdin", daemon=True).start()
