"""Host agents: the site agent's helpers on the site's other hosts, reached over stdio.

A rank's rendezvous socket is inherited, so it cannot cross ``ssh`` or ``pbsdsh``. When a
site's processes are on hosts other than the site agent's, the job message names, per such
host, a command that starts an agent there with its stdio connected (``ssh HOST``,
``pbsdsh -h HOST``, ``srun -w HOST``): the site agent starts one *host agent* per host, hands
it that host's part of the job and relays: everything a host agent says goes up to
``coc-run`` unchanged (but its ``hello`` and ``done``), and what ``coc-run`` says goes down
(``gateways``, ``launch``, ``rendezvous``, ``stop``, ``kill``, ``status``, ``exited`` to every
host agent; ``stdin`` to rank 0's).
A host agent that ends before its ``done`` is a fatal error naming the host.
"""

import asyncio
import contextlib
import os
import signal

from coc.errors import CocError
from coc import protocol
from coc.childprocess import die_with_parent

__all__ = ["HostAgent", "start_host_agents", "forward", "wait_all"]

#: Seconds a host agent has to say hello.
HELLO_TIMEOUT = 30.0


class HostAgent:
    """One host agent: its process, its share of the job, and the relay of its messages."""

    def __init__(self, site_agent, host, process, part):
        self.site_agent, self.host, self.process, self.part = site_agent, host, process, part
        self.done = False
        self.follower = None

    @property
    def has_rank0(self):
        """Return True when rank 0 (which reads coc-run's stdin) runs on this host."""
        return any(r.get("stdin") for r in self.part["ranks"])

    def send(self, message):
        """Pass one message down to the host agent (a dead one is noticed by the follower)."""
        if not self.process.stdin.is_closing():
            self.process.stdin.write(protocol.encode(message))

    async def follow(self):
        """Relay the host agent's messages up until its channel closes."""
        try:
            while (message := await protocol.read_message(self.process.stdout)) is not None:
                if message["type"] == "done":
                    self.done = True
                elif message["type"] != "hello":
                    await self.site_agent.send(message)
        except CocError as exc:
            await self.site_agent.send({"type": "error", "fatal": True,
                                        "message": f"host {self.host}: broken channel: {exc}"})
        code = await self.process.wait()
        if not self.done:
            await self.site_agent.send({
                "type": "error", "fatal": True,
                "message": f"host {self.host}: its agent ended (exit code {code}) with the "
                           "job running there"})

    def kill(self):
        """SIGKILL the host agent's launcher (ssh, pbsdsh); its processes die with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


async def _start(site_agent, host, argv, part):
    process = await asyncio.create_subprocess_exec(
        *argv, start_new_session=True, preexec_fn=die_with_parent,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    helper = HostAgent(site_agent, host, process, part)
    site_agent.host_agents.append(helper)
    try:
        hello = await asyncio.wait_for(protocol.read_message(process.stdout), HELLO_TIMEOUT)
    except (asyncio.TimeoutError, CocError):
        hello = None
    if hello is None or hello.get("type") != "hello":
        helper.kill()
        await process.wait()
        await site_agent.send({"type": "error", "fatal": True,
                               "message": f"host {host}: cannot start an agent there with "
                                          f"{argv[0]!r} (exit code {process.returncode})"})
        return
    helper.send(part)
    helper.follower = asyncio.ensure_future(helper.follow())


async def start_host_agents(site_agent, job):
    """Start a host agent for every host ``job["hosts"]`` names; return the local rest.

    ``job["hosts"]`` maps a host to the command that starts an agent on it; the ranks and
    gateway daemons whose ``host`` it names go to that host's agent.
    """
    remote = job.get("hosts") or {}
    parts = {host: {**job, "hosts": {}, "ranks": [], "gateways": []} for host in remote}
    local = {**job, "hosts": {}, "ranks": [], "gateways": []}
    for key in ("ranks", "gateways"):
        for item in job.get(key, ()):
            parts.get(item["host"], local)[key].append(item)
    await asyncio.gather(*(_start(site_agent, host, remote[host], part)
                           for host, part in parts.items()))
    return local


def forward(site_agent, message):
    """Pass ``message`` from coc-run to the host agents; return True if it is theirs alone.

    ``stdin`` belongs to the host agent of rank 0 when there is one.
    """
    kind = message["type"]
    if kind == "stdin":
        holder = next((h for h in site_agent.host_agents if h.has_rank0), None)
        if holder is not None:
            holder.send(message)
        return holder is not None
    if kind in ("gateways", "launch", "rendezvous", "stop", "kill", "status", "exited"):
        for helper in site_agent.host_agents:
            helper.send(message)
    return False


async def wait_all(site_agent, grace):
    """Wait for every host agent to end (after its ``done``); kill those that do not."""
    helpers = site_agent.host_agents
    for helper in helpers:
        helper.send({"type": "stop"} if grace else {"type": "kill"})
    waits = [asyncio.ensure_future(h.process.wait()) for h in helpers]
    if waits:
        await asyncio.wait(waits, timeout=grace + 2.0)
    for helper in helpers:
        if helper.process.returncode is None:
            helper.kill()
        await helper.process.wait()
        if helper.follower is not None:
            await helper.follower
