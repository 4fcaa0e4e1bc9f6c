"""The site agent (``python -m coc.launcher.agent``): start a site's processes and relay them.

``coc-run`` starts one agent per site through the site's spawner; the agent's stdin and stdout
are the control channel (:mod:`coc.protocol` framing). The agent starts the ranks and
gateway daemons the job message lists, each in its own process group, streams the ranks'
output, relays the rendezvous (ranks: over inherited socket pairs; gateway daemons: over
their stdin/stdout, with :mod:`coc.gatewayclient`'s messages), reports every exit, and on
``stop`` (or when the channel closes) ends them all: SIGTERM, then SIGKILL after the grace
period. A rank's rendezvous socket stays open after the rendezvous: through it the agent
asks the rank for its ``status`` (coc-run's watchdog) and passes on ``exited`` notices.
"""

import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import sys
import traceback

import coc
from coc.errors import CocError, ControlError, LaunchError
from coc import gatewayclient, protocol
from coc.childprocess import die_with_parent
from coc.launcher import hostagent
from coc.launcher.failover import is_failover_line
from coc.rendezvous import CONTROL_FD
from coc.mpi4py import hook

__all__ = ["Agent", "main", "serve", "open_channel", "rank_socket", "MPIEXEC"]

#: Set in the agent's environment by the ``mpiexec`` spawner only: the site's mpiexec, which
#: then starts the site's ranks (``coc.launcher.spawners.mpiexec``).
MPIEXEC = "COC_AGENT_MPIEXEC"

_READ_SIZE = 1 << 16
_DRAIN_TIMEOUT = 1.0   # seconds to collect output after a process exits
_LOG_LINES = 20        # lines of a gateway daemon's log kept to explain its failure
_STATUS_TIMEOUT = 1.0  # seconds ranks and gateway daemons have to answer a status request


def _signal_group(pid, signum):
    """Send ``signum`` to the process group led by ``pid``, ignoring one that is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


class _ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol that also resolves ``exited`` when the process itself exits.

    ``Process.wait()`` (Python 3.11) returns only once every pipe has closed too, which a
    grandchild holding stdout can delay forever; the agent must see the exit at once.
    """

    def __init__(self, limit, loop):
        super().__init__(limit=limit, loop=loop)
        self.exited = loop.create_future()

    def process_exited(self):
        if not self.exited.done():
            self.exited.set_result(self._transport.get_returncode())
        super().process_exited()


async def _spawn(argv, **options):
    """Start ``argv`` like ``asyncio.create_subprocess_exec``; return (process, exit future)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ExitProtocol(_READ_SIZE, loop), *argv, **options)
    return asyncio.subprocess.Process(transport, protocol, loop), protocol.exited


class Child:
    """One process the agent started: a rank or a gateway daemon."""

    def __init__(self, kind, ident, process, exited):
        self.kind, self.ident, self.process, self.exited = kind, ident, process, exited
        self.pumps = []
        self.watcher = None
        self.log = collections.deque(maxlen=_LOG_LINES)
        self.reported = None      # called once its exit has gone to coc-run
        self.channel = None       # a rank's control socket (writer) after the rendezvous
        self.follower = None      # the task reading the rank's answers on it
        self.asked = collections.deque()  # futures of status requests in flight, oldest first

    @property
    def key(self):
        """Return the field naming this process in messages: ``{"rank": 3}``."""
        return {self.kind: self.ident}


class Agent:
    """Run one site's part of a job, driven by messages from ``coc-run``."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.children = []
        self.launchers = []       # processes that start ranks for the agent (a site's mpiexec)
        self.host_agents = []     # agents on the site's other hosts (coc.launcher.hostagent)
        self.held_ranks = []      # ranks waiting for "launch" (cross-site links being made)
        self.rank_sockets = {}
        self.grace = 1.0
        self.stopping = None      # the teardown task, once started
        self.stop_requested = asyncio.Event()
        self.kill_now = asyncio.Event()

    async def send(self, message):
        """Send one message to ``coc-run``; a vanished launcher is handled by the read loop."""
        with contextlib.suppress(ConnectionError):
            await protocol.send_message(self.writer, message)

    async def run(self):
        """Serve the control channel until the job has ended here; return the exit code."""
        await self.send({"type": "hello", "pid": os.getpid(), "hostname": socket.gethostname(),
                         "python": sys.executable, "coc": coc.__version__})
        reading = asyncio.create_task(self.read_loop())
        stop = asyncio.create_task(self.stop_requested.wait())
        await asyncio.wait([reading, stop], return_when=asyncio.FIRST_COMPLETED)
        if reading.done() and reading.exception() is not None:
            # a bug here must not leave the site's processes running unwatched
            error = reading.exception()
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            await self.send({"type": "error", "fatal": True, "message": f"agent failed: {text}"})
            self.stop(self.grace)
        await self.stopping
        reading.cancel()
        await self.send({"type": "done"})
        return 0

    async def read_loop(self):
        """Act on messages from ``coc-run``; its disappearance stops the job here."""
        while True:
            try:
                message = await protocol.read_message(self.reader, "coc-run")
            except CocError as exc:
                await self.send({"type": "error", "message": f"agent: {exc}"})
                message = None
            if message is None:
                self.stop(self.grace)
                return
            await self.dispatch(message)

    async def dispatch(self, message):
        """Act on one message from ``coc-run``."""
        if self.host_agents and hostagent.forward(self, message):
            return
        kind = message["type"]
        if kind == "job":
            await self.start_job(message)
        elif kind == "gateways":
            self.update_gateways(message["updates"])
        elif kind == "launch":
            ranks, self.held_ranks = self.held_ranks, []
            if not self.stop_requested.is_set():
                await self.start_ranks(ranks)
        elif kind == "rendezvous":
            await self.answer_rendezvous(message["answers"])
        elif kind == "stdin":
            self.forward_stdin(message)
        elif kind == "status":
            asyncio.create_task(self.report_status(message))
        elif kind == "exited":
            self.tell_ranks({"type": "exited", "rank": message["rank"]})
        elif kind == "stop":
            self.stop(self.grace)
        elif kind == "kill":
            self.stop(0)
        else:
            await self.send({"type": "error", "message": f"agent: unknown message {kind!r}"})

    async def start_job(self, job):
        """Start the job's gateway daemons, then its ranks."""
        self.grace = float(job.get("grace", self.grace))
        if job.get("hosts"):          # processes on other hosts: their host agents start them
            job = await hostagent.start_host_agents(self, job)
        for gateway in job.get("gateways", ()):
            await self.start_child("gateway", gateway["endpoint"], gateway["argv"],
                                   gateway.get("env", {}), config=gateway.get("config"))
        if job.get("hold_ranks"):          # until coc-run's "launch": the links are up
            self.held_ranks = list(job.get("ranks", ()))
            return
        await self.start_ranks(job.get("ranks", ()))

    async def start_ranks(self, ranks):
        """Start this site's ranks (through the site's own MPI when it launched the agent)."""
        if ranks and os.environ.get(MPIEXEC):    # the site's own MPI starts the ranks
            from coc.launcher.spawners import mpiexec
            await mpiexec.start_ranks(self, ranks, os.environ[MPIEXEC])
            return
        for rank in ranks:
            await self.start_child("rank", rank["rank"], rank["argv"], rank["env"],
                                   stdin=rank.get("stdin", False), welcome=rank["welcome"])

    async def start_child(self, kind, ident, argv, env, *, stdin=False, config=None,
                          welcome=None):
        """Start one rank or gateway daemon in its own process group and watch it.

        A rank finds ``welcome`` (its endpoint id and its issued keys) waiting on its
        rendezvous socket; a gateway daemon reads ``config`` as its first stdin message.
        """
        environment = {**os.environ, **env}
        pass_fds = ()
        ours = None
        if kind == "rank":
            ours, theirs = rank_socket(welcome)
            environment[CONTROL_FD] = str(theirs.fileno())
            environment["PYTHONPATH"] = hook.rank_pythonpath(environment)
            pass_fds = (theirs.fileno(),)
        try:
            process, exited = await _spawn(
                argv, env=environment, pass_fds=pass_fds, start_new_session=True,
                preexec_fn=die_with_parent,
                stdin=asyncio.subprocess.PIPE if stdin or kind == "gateway"
                else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            await self.send({"type": "error", kind: ident,
                             "message": f"cannot execute {argv[0]!r}: {exc.strerror}"})
            await self.send({"type": "exit", kind: ident, "code": code, "signal": None})
            return
        finally:
            if kind == "rank":
                theirs.close()
        self.adopt(Child(kind, ident, process, exited), ours, config)

    def adopt(self, child, rank_socket=None, config=None):
        """Follow a started child: its output, its rendezvous (ranks), config (gateways), exit.

        ``child.process`` needs ``pid`` (leader of the child's process group), ``returncode``,
        ``stdin`` and ``stdout``/``stderr`` stream readers.
        """
        self.children.append(child)
        process = child.process
        if child.kind == "rank":
            self.rank_sockets[child.ident] = asyncio.create_task(
                self.relay_address(child.ident, rank_socket))
        if child.kind == "gateway":
            process.stdin.write(protocol.encode(gatewayclient.config(config)))
            child.pumps += [asyncio.create_task(self.follow_gateway(child)),
                            asyncio.create_task(self.keep_log(child))]
        else:
            child.pumps += [asyncio.create_task(self.pump(child, "stdout", process.stdout)),
                            asyncio.create_task(self.pump(child, "stderr", process.stderr))]
        child.watcher = asyncio.create_task(self.watch(child))

    async def pump(self, child, stream, pipe):
        """Relay one output stream of a child to ``coc-run`` until it closes."""
        while data := await pipe.read(_READ_SIZE):
            await self.output(child, stream, data)

    async def output(self, child, stream, data):
        """Send ``data`` that ``child`` wrote on ``stream`` to ``coc-run``."""
        await self.send({"type": "output", **child.key, "stream": stream,
                         "data": protocol.pack_bytes(data)})

    async def follow_gateway(self, gateway):
        """Relay a gateway daemon's answers; its final statistics become its output.

        Its address goes to ``coc-run``, ``ok`` as ``ready``, ``status`` to the status
        request in flight; an ``error`` or a garbled channel is fatal (it cannot forward as
        told: the job cannot run).
        """
        peer = f"gateway daemon {gateway.ident}"
        try:
            while (message := await protocol.read_message(gateway.process.stdout,
                                                          peer)) is not None:
                try:
                    kind = gatewayclient.answer(message, "gateway daemon")["type"]
                except LaunchError as exc:
                    await self.send({"type": "error", "gateway": gateway.ident, "fatal": True,
                                     "message": str(exc)})
                    continue
                if kind == "address":
                    await self.send({"type": "address", "gateway": gateway.ident,
                                     "address": message["address"]})
                elif kind == "status":
                    self._answered(gateway, message["stats"])
                elif kind == "ok":
                    await self.send({"type": "ready", "gateway": gateway.ident})
                elif kind == "exit":        # as it stops: one JSON line of output
                    final = {"exit": message["reason"], "stats": message["stats"]}
                    await self.output(gateway, "stdout", json.dumps(final).encode() + b"\n")
        except ControlError as exc:
            await self.send({"type": "error", "gateway": gateway.ident, "fatal": True,
                             "message": str(exc)})

    async def keep_log(self, gateway):
        """Relay a gateway daemon's log, keeping its last lines to explain a failure."""
        while line := await gateway.process.stderr.readline():
            text = line.decode(errors="replace").rstrip("\n")
            gateway.log.append(text)
            if is_failover_line(text):  # coc-run reports failovers even when logs are dropped
                await self.send({"type": "error", "gateway": gateway.ident, "failover": True,
                                 "message": text})
            await self.output(gateway, "stderr", line)

    async def relay_address(self, rank, sock):
        """Wait for a rank's engine address on its socket and pass it to ``coc-run``.

        Returns the socket's (reader, writer) for the answer, or None when the rank never
        sent one.
        """
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        try:
            message = await protocol.read_message(reader, f"rank {rank}")
        except (ConnectionError, CocError) as exc:
            message = None
            if isinstance(exc, CocError):
                await self.send({"type": "error", "rank": rank, "message": f"rendezvous: {exc}"})
        if message is None or message["type"] != "address":
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()  # the rank ended without reading its welcome
            return None
        await self.send({"type": "address", "rank": rank, "address": message["address"]})
        return reader, writer

    def update_gateways(self, updates):
        """Give this site's gateway daemons their peers; each answers ``ready`` when done."""
        for child in self.children:
            update = updates.get(str(child.ident))
            if child.kind == "gateway" and update and not child.process.stdin.is_closing():
                child.process.stdin.write(protocol.encode(gatewayclient.update(**update)))

    async def answer_rendezvous(self, answers):
        """Hand every rank of this site its rendezvous answer; keep its socket for status."""
        for rank, answer in answers.items():
            task = self.rank_sockets.pop(int(rank), None)
            if task is None:
                continue
            channel = await task
            if channel is None:
                continue
            reader, writer = channel
            try:
                await protocol.send_message(writer, {"type": "rendezvous", **answer})
            except ConnectionError:
                writer.close()
                continue
            child = next((c for c in self.children
                          if c.kind == "rank" and c.ident == int(rank)), None)
            if child is None or child.process.returncode is not None:
                writer.close()
                continue
            child.channel = writer
            child.follower = asyncio.create_task(self.follow_rank(child, reader))

    async def follow_rank(self, child, reader):
        """Take a rank's answers on its control socket until the rank closes it."""
        try:
            peer = f"rank {child.ident}"
            while (message := await protocol.read_message(reader, peer)) is not None:
                if message["type"] == "status":
                    self._answered(child, message)
        except (ConnectionError, CocError):
            pass

    def _answered(self, child, answer):
        """Give ``answer`` to the oldest status request of ``child`` still waiting.

        Answers come in the order of the requests; one whose request has given up (its
        future cancelled) goes to the next, as the newer status it is.
        """
        while child.asked:
            future = child.asked.popleft()
            if not future.done():
                future.set_result(answer)
                return

    def tell_ranks(self, message):
        """Write ``message`` to every live rank's control socket (a closed one is skipped)."""
        data = protocol.encode(message)
        for child in self.children:
            if child.channel is not None and not child.channel.is_closing():
                child.channel.write(data)

    async def report_status(self, request):
        """Ask every rank and gateway daemon here for its status; send coc-run the answers.

        Ranks answer with their progress and pending operations, gateway daemons with their
        engine stats; one that does not answer within ``timeout`` seconds is reported as
        None (a rank busy outside coc, without releasing the GIL, cannot answer). Requests
        may overlap (a new one before an unanswered one has timed out): each has its own
        futures.
        """
        loop = asyncio.get_running_loop()
        asked = {}
        for child in self.children:
            if child.process.returncode is not None:
                continue
            if child.kind == "rank" and child.channel is not None \
                    and not child.channel.is_closing():
                child.channel.write(protocol.encode({"type": "status", "id": request.get("id")}))
            elif child.kind == "gateway" and not child.process.stdin.is_closing():
                child.process.stdin.write(protocol.encode(gatewayclient.STATUS))
            else:
                continue
            asked[child] = loop.create_future()
            child.asked.append(asked[child])
        if asked:
            await asyncio.wait(asked.values(),
                               timeout=float(request.get("timeout", _STATUS_TIMEOUT)))
        answers = {"ranks": {}, "gateways": {}}
        for child, future in asked.items():
            answer = future.result() if future.done() else None
            future.cancel()                  # unanswered: a late answer skips it
            answers[f"{child.kind}s"][str(child.ident)] = answer
        await self.send({"type": "status", "id": request.get("id"), **answers})

    def forward_stdin(self, message):
        """Pass a chunk of ``coc-run``'s stdin to rank 0 (no data: close its stdin).

        The write runs in its own task, so a rank that does not read never blocks this
        channel; ``stdin-ack`` asks ``coc-run`` for the next chunk (one in flight at a time),
        ``closed`` tells it to stop reading because nobody will.
        """
        rank0 = next((c for c in self.children if c.kind == "rank"
                      and c.process.stdin is not None), None)
        asyncio.create_task(self._write_stdin(rank0, message.get("data")))

    async def _write_stdin(self, child, data):
        pipe = None if child is None else child.process.stdin
        if pipe is not None and not pipe.is_closing():
            if data is None:
                pipe.close()
                return
            try:
                pipe.write(protocol.unpack_bytes(data))
                await pipe.drain()
                await self.send({"type": "stdin-ack"})
                return
            except ConnectionError:
                pipe.close()
        if data is not None:
            await self.send({"type": "stdin-ack", "closed": True})

    async def watch(self, child):
        """Wait for a child to exit, end what is left of its group, and report the exit."""
        code = await child.exited
        _signal_group(child.process.pid, signal.SIGKILL)
        relay = self.rank_sockets.pop(child.ident, None) if child.kind == "rank" else None
        tasks = [*child.pumps, *([relay] if relay else [])]
        done, pending = await asyncio.wait(tasks, timeout=_DRAIN_TIMEOUT)
        for task in pending:
            task.cancel()
        if relay in done and relay.result() is not None:
            relay.result()[1].close()    # it sent its address but will not need the answer
        if child.channel is not None:
            child.channel.close()
            child.follower.cancel()
        await self.send({"type": "exit", **child.key, "code": code if code >= 0 else None,
                         "signal": -code if code < 0 else None, "log": list(child.log)})
        if child.reported is not None:
            child.reported()

    def stop(self, grace):
        """Begin ending every child (SIGTERM, SIGKILL after ``grace`` s); 0 kills at once."""
        if grace == 0:
            self.kill_now.set()
        if self.stopping is None:
            self.stopping = asyncio.create_task(self._teardown(grace))
            self.stop_requested.set()

    async def _teardown(self, grace):
        watchers = [c.watcher for c in self.children if c.watcher is not None]
        for child in self.children:
            if child.process.returncode is None:
                _signal_group(child.process.pid, signal.SIGKILL if grace == 0 else signal.SIGTERM)
        if watchers and grace:
            finished = asyncio.create_task(asyncio.wait(watchers))
            killed = asyncio.create_task(self.kill_now.wait())
            await asyncio.wait([finished, killed], timeout=grace,
                               return_when=asyncio.FIRST_COMPLETED)
            finished.cancel()
            killed.cancel()
        for child in self.children:
            if child.process.returncode is None:
                _signal_group(child.process.pid, signal.SIGKILL)
        if watchers:
            await asyncio.wait(watchers)
        for launcher in self.launchers:     # it ends once its ranks have; else it is killed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(launcher.wait()), _DRAIN_TIMEOUT)
            _signal_group(launcher.pid, signal.SIGKILL)
            await launcher.wait()
        if self.host_agents:
            await hostagent.wait_all(self, grace)


def rank_socket(welcome):
    """Return (agent's end, rank's end) of a rank's rendezvous socket, ``welcome`` waiting in it."""
    ours, theirs = socket.socketpair()
    ours.sendall(protocol.encode({"type": "welcome", **welcome}))  # waits in the buffer
    return ours, theirs


async def open_channel():
    """Return a reader on stdin and a writer on stdout, moving stray prints to stderr."""
    loop = asyncio.get_running_loop()
    channel_out = os.dup(1)
    os.dup2(2, 1)                 # a print() in the agent must not corrupt the channel
    sys.stdout = sys.stderr
    reader = asyncio.StreamReader(limit=protocol.MAX_MESSAGE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(0, "rb", 0))
    transport, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                    os.fdopen(channel_out, "wb", 0))
    return reader, asyncio.StreamWriter(transport, flow, reader, loop)


async def _main():
    return await serve(*await open_channel())


async def serve(reader, writer, agent_class=Agent):
    """Run an agent on a control channel (asyncio streams) until its job has ended here.

    ``python -m coc.launcher.agent`` serves its stdin/stdout; a ``--batch`` job's agent
    serves its connection to the relay (``coc.launcher.batch``, with its own ``agent_class``).
    """
    agent = agent_class(reader, writer)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, lambda: agent.stop(agent.grace))
    code = await agent.run()
    writer.close()
    return code


def main():
    """Run the agent on this process's stdin/stdout and return its exit code."""
    return asyncio.run(_main())


if __name__ == "__main__":
    sys.exit(main())
