"""The ``mpiexec`` spawner: the site's own MPI starts the site's ranks (PACX-style).

Three parts, one per process that takes part:

- ``coc-run``: :class:`MpiexecSpawner` starts the site's agent as the ``local`` spawner does,
  with ``COC_AGENT_MPIEXEC`` naming the site's ``mpiexec`` (:func:`find_mpiexec`).
- The agent: :func:`start_ranks` runs ``mpiexec -n K python -m coc.rendezvous`` once for the
  site's K ranks, with ``COC_SITE_MPI=1`` (so
  ``coc.comm`` carries messages between them through mpi4py) and ``COC_CONTROL_SOCKET``,
  the path of a Unix socket the agent listens on: mpiexec's proxies do not pass inherited
  file descriptors on.
- Each process mpiexec starts is a *shepherd* (:func:`coc.rendezvous.shepherd`): it
  connects to that socket and says its ``PMI_RANK``; the agent maps it to the site's
  ``PMI_RANK``-th coc rank and answers with the rank's command and environment, passing the
  rank's stdout, stderr, stdin (rank 0) and rendezvous socket as file descriptors
  (``SCM_RIGHTS``). The shepherd starts the program with them, keeping MPI's own ``PMI_*``
  variables and fds, and reports the program's exit. So a rank started by mpiexec is, for
  the agent, a rank like any other: its output is its own, its exit status exact, its
  rendezvous the usual inherited socket.

The shepherd waits until the agent has passed the exit on to ``coc-run`` before it ends (and
then ends with 0), so the first failure is the one ``coc-run`` reports and the teardown is
``coc-run``'s (SIGTERM, then SIGKILL), not mpiexec's. Only the shepherds of an agent that
vanished end with the program's status, which makes mpiexec abort the rest.
"""

import asyncio
import os
import shutil
import signal
import socket
import sys
import sysconfig
import tempfile

from coc.errors import CocError, LaunchError
from coc import protocol
from coc.pycommand import python_argv
from coc.childprocess import die_with_parent
from coc.launcher.agent import MPIEXEC, Child, rank_socket
from coc.rendezvous import CONTROL_SOCKET
from coc.launcher import spawners
from coc.launcher.spawners.local import LocalSpawner
from coc.launcher.spawners.ssh import SshSpawner
from coc.mpi4py import hook

__all__ = ["MpiexecSpawner", "USER_MPIEXEC", "find_mpiexec", "start_ranks", "SITE_MPI",
           "SHEPHERD"]

#: Environment variable naming the mpiexec to use, when the one found is not the right one.
USER_MPIEXEC = "COC_MPIEXEC"
#: Environment variable telling ``coc.comm`` that the site's MPI started the ranks.
SITE_MPI = "COC_SITE_MPI"
#: Variables that belong to the site's MPI: a rank keeps mpiexec's values.
_MPI_OWNED = ("PMI_RANK", "PMI_SIZE")
#: What each process mpiexec starts runs: :func:`coc.rendezvous.shepherd`.
SHEPHERD = "coc.rendezvous"


def find_mpiexec(environ=None):
    """Return the path of the site's ``mpiexec``, or None.

    ``$COC_MPIEXEC`` wins; then the one installed next to this Python (``pip install mpich``
    puts it there, and a pyenv shim on PATH would cost a shell per start); then ``PATH``.
    """
    environ = os.environ if environ is None else environ
    if environ.get(USER_MPIEXEC):
        return environ[USER_MPIEXEC]
    beside = os.path.join(sysconfig.get_path("scripts"), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("mpiexec", path=environ.get("PATH"))


#: The value of ``COC_AGENT_MPIEXEC`` that lets the agent find the site's mpiexec itself.
FIND_ON_SITE = "auto"


class MpiexecSpawner(spawners.Spawner):
    """Start the agent on the site; the site's ``mpiexec`` then starts the site's ranks there.

    Without a ``login`` the site is this machine (the agent runs here, as ``local``); with
    one the agent runs on the login host over ssh (:class:`SshSpawner`, same settings), and
    so does the site's mpiexec: the site setting ``mpiexec`` names it there, else the agent
    finds it on the site (:func:`find_mpiexec`). Under ``--batch`` it runs inside the batch
    job, which inherits the variable from the relay.
    """

    kind = "mpiexec"

    def __init__(self, site, settings=None, topology=None):
        super().__init__(site, settings, topology)
        cls = SshSpawner if self.settings.get("login") else LocalSpawner
        self.reach = cls(site, settings, topology)
        self.reach.agent_argv = self.agent_argv          # with the mpiexec variable

    @property
    def remote(self):
        """Return True when the site is reached over ssh (its mpiexec runs there)."""
        return isinstance(self.reach, SshSpawner)

    def site_mpiexec(self):
        """Return the mpiexec the agent runs: a path, or :data:`FIND_ON_SITE`."""
        if self.settings.get("mpiexec"):
            return str(self.settings["mpiexec"])
        if self.remote:
            return FIND_ON_SITE
        found = find_mpiexec()
        if found is None:
            raise LaunchError("spawner 'mpiexec': no mpiexec found (pip install mpich mpi4py, "
                              f"or set {USER_MPIEXEC})", site=self.site)
        return found

    def agent_argv(self):
        """Return the agent's command with ``COC_AGENT_MPIEXEC`` set (it crosses ssh)."""
        return ["env", f"{MPIEXEC}={self.site_mpiexec()}",
                *python_argv(self.agent_module, python=self.python)]

    async def start(self, env):
        """Start the agent the way the site is reached; raise LaunchError if no mpiexec."""
        self.reach.agent_module = self.agent_module        # --batch starts its relay
        return await self.reach.start(env)

    @property
    def agent_where(self):
        return self.reach.agent_where

    def host_argv(self, host, argv):
        return self.reach.host_argv(host, argv)

    def host_agent_argv(self, host):
        return self.reach.host_agent_argv(host)

    def listen_host(self, host):
        return self.reach.listen_host(host)


# -- the agent's side ----------------------------------------------------------------------------


class ShepherdedRank:
    """A rank started by a shepherd, shaped as the agent's children are (pid, pipes, code)."""

    def __init__(self, pid, stdin, stdout, stderr):
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode = None


async def _read_exactly(loop, sock, size):
    data = b""
    while len(data) < size:
        chunk = await loop.sock_recv(sock, size - len(data))
        if not chunk:
            raise ConnectionError("the shepherd hung up")
        data += chunk
    return data


async def _reader(loop, fd):
    """Return an asyncio StreamReader on the read end ``fd`` of a pipe."""
    reader = asyncio.StreamReader(limit=protocol.MAX_MESSAGE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(fd, "rb", 0))
    return reader


async def _writer(loop, fd):
    """Return an asyncio StreamWriter on the write end ``fd`` of a pipe."""
    transport, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                    os.fdopen(fd, "wb", 0))
    return asyncio.StreamWriter(transport, flow, None, loop)


async def _attach(agent, conn, ranks, attached):
    """Serve one shepherd: give it its rank's command, environment and fds; adopt the rank."""
    loop = asyncio.get_running_loop()
    hello = protocol.decode(await _read_exactly(
        loop, conn, protocol.decode_length(await _read_exactly(loop, conn, 4), "a shepherd")),
        "a shepherd")
    index = hello.get("index")
    if not isinstance(index, int) or not 0 <= index < len(ranks) or index in attached:
        raise LaunchError(f"a shepherd claims PMI_RANK {index!r} of {len(ranks)}")
    attached.add(index)
    rank = ranks[index]
    ours, theirs = rank_socket(rank["welcome"])
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if rank.get("stdin") else (None, None)
    env = {k: v for k, v in rank["env"].items() if k not in _MPI_OWNED}
    env["PYTHONPATH"] = hook.rank_pythonpath({**os.environ, **env})
    fds = [out_w, err_w, theirs.fileno(), *([in_r] if in_r is not None else [])]
    start = {"type": "start", "rank": rank["rank"], "argv": rank["argv"], "env": env}
    message = protocol.encode(start)
    try:          # the fds travel with the header; the body may exceed the socket's buffer
        socket.send_fds(conn, [message[:4]], fds)
    finally:
        for fd in fds[:2] + fds[3:]:
            os.close(fd)
        theirs.close()
    await loop.sock_sendall(conn, message[4:])
    reader, writer = await asyncio.open_unix_connection(sock=conn)
    started = await protocol.read_message(reader)
    if started is None or started["type"] != "started":
        raise LaunchError("its shepherd ended before starting it", rank=rank["rank"])
    process = ShepherdedRank(started["pid"],
                             await _writer(loop, in_w) if in_w is not None else None,
                             await _reader(loop, out_r), await _reader(loop, err_r))
    child = Child("rank", rank["rank"], process, loop.create_future())
    child.reported = writer.close
    child.pumps.append(asyncio.create_task(_follow_exit(reader, child)))
    agent.adopt(child, ours)


async def _follow_exit(reader, child):
    """Resolve ``child.exited`` with the exit its shepherd reports (SIGKILL if it vanishes)."""
    try:
        ended = await protocol.read_message(reader)
    except (CocError, ConnectionError):    # a garbled channel: treated as a vanished one
        ended = None
    if ended is None:      # the shepherd was killed, and its program with it (PDEATHSIG)
        ended = {"code": None, "signal": signal.SIGKILL}
    code = ended["code"] if ended["signal"] is None else -ended["signal"]
    child.process.returncode = code
    child.exited.set_result(code)


async def _attach_all(agent, listener, ranks, mpiexec):
    """Adopt the ranks as their shepherds come, until all came or mpiexec ended.

    Ranks whose shepherd never came (mpiexec failed) are reported as failed.
    """
    loop = asyncio.get_running_loop()
    attached, tasks = set(), []
    ended = asyncio.ensure_future(mpiexec.wait())
    while len(tasks) < len(ranks):
        accepting = asyncio.ensure_future(loop.sock_accept(listener))
        await asyncio.wait([accepting, ended], return_when=asyncio.FIRST_COMPLETED)
        if not accepting.done():
            accepting.cancel()
            break
        conn, _ = accepting.result()
        tasks.append(asyncio.create_task(_attach(agent, conn, ranks, attached)))
    for task in tasks:
        try:
            await task
        except (LaunchError, ConnectionError) as exc:
            await agent.send({"type": "error", "message": f"mpiexec: {exc}"})
    code = ended.result() if ended.done() else None
    for index in sorted(set(range(len(ranks))) - attached):
        why = "before it started this rank" if code is not None else "without this rank"
        await agent.send({"type": "error", "rank": ranks[index]["rank"],
                          "message": f"mpiexec ended (exit code {code}) {why}"})
        await agent.send({"type": "exit", "rank": ranks[index]["rank"], "code": code or 1,
                          "signal": None})


async def start_ranks(agent, ranks, mpiexec):
    """Start ``ranks`` (the site's part of the job message) with one run of ``mpiexec``.

    Returns once every rank has started (as the ``local`` agent does), so messages that
    follow the job, such as rank 0's stdin, find their rank.
    """
    directory = tempfile.mkdtemp(prefix="coc-mpiexec-")    # 0700: only we may connect
    path = os.path.join(directory, "control")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(len(ranks))
        listener.setblocking(False)
        if mpiexec == FIND_ON_SITE:
            mpiexec = find_mpiexec({k: v for k, v in os.environ.items() if k != MPIEXEC})
            if mpiexec is None:
                for rank in ranks:
                    await agent.send({"type": "error", "rank": rank["rank"],
                                      "message": "no mpiexec found on the site (set the "
                                                 "site's 'mpiexec' setting, or "
                                                 f"{USER_MPIEXEC})"})
                    await agent.send({"type": "exit", "rank": rank["rank"], "code": 127,
                                      "signal": None})
                return
        argv = [mpiexec, "-n", str(len(ranks)), *python_argv(SHEPHERD)]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, env={**{k: v for k, v in os.environ.items() if k != MPIEXEC},
                            CONTROL_SOCKET: path, SITE_MPI: "1"},
                stdin=asyncio.subprocess.DEVNULL, stdout=sys.stderr.fileno(),
                start_new_session=True, preexec_fn=die_with_parent)
        except OSError as exc:
            for rank in ranks:
                await agent.send({"type": "error", "rank": rank["rank"],
                                  "message": f"cannot execute {mpiexec!r}: {exc.strerror}"})
                await agent.send({"type": "exit", "rank": rank["rank"], "code": 127,
                                  "signal": None})
            return
        agent.launchers.append(process)
        await _attach_all(agent, listener, ranks, process)
    finally:
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)
