"""Spawners: how ``coc-run`` starts a site's agent, one small class per way a site starts programs.

A spawner does one thing: start ``python -m coc.launcher.agent`` on the site with the agent's
stdin and stdout connected back to ``coc-run`` (they are the control channel). Everything else
(ranks, gateway daemons, output, teardown) travels over that channel, so a new way of
reaching a site (ssh, ``srun``, ``pbsdsh``, the site's ``mpiexec``, a network namespace) is
one new subclass registered in :data:`SPAWNERS`.
"""

import abc
import socket
import sys

from coc import __version__
from coc.errors import LaunchError
from coc.pycommand import python_argv

__all__ = ["Spawner", "SPAWNERS", "PLANNED", "AGENT_MODULE", "spawner_for"]

#: The module every spawner starts on its site.
AGENT_MODULE = "coc.launcher.agent"


class Spawner(abc.ABC):
    """Start one site's agent; its stdio becomes the control channel.

    Parameters
    ----------
    site : str
        The site this spawner reaches.
    settings : dict, optional
        The site's settings: its profile (``launcher/profiles``) merged with the topology's
        ``login`` (see docs/launcher.md, "Site profiles"). Keys a spawner does not use are
        ignored.
    topology : networkx.Graph, optional
        The job's topology (host names, hostnames and interface addresses).
    """

    #: The word naming this spawner in topology files and ``--spawner SITE=KIND``.
    kind = None
    #: The module the spawner starts on the site (``coc-run --batch`` starts its relay instead).
    agent_module = AGENT_MODULE

    def __init__(self, site, settings=None, topology=None):
        self.site = site
        self.settings = dict(settings or {})
        self.topology = topology

    @property
    def python(self):
        """Return the Python that runs the agent and Python ranks on the site."""
        return self.settings.get("python") or sys.executable

    @property
    def agent_where(self):
        """Return the host the site's agent runs on, as messages name it."""
        return getattr(self, "destination", None) or socket.gethostname()

    def python_problem(self, problem):
        """Return the line that says the site's Python cannot run coc, and the fix."""
        return (f"Python {self.python} {problem}; install "
                f"coc {__version__} for that Python, or name one that has it in the site's "
                "'python' setting (docs/launcher.md, \"Which Python runs on a site\")")

    def agent_argv(self):
        """Return the command that runs the agent on the site (the same Python by default)."""
        return python_argv(self.agent_module, python=self.python)

    def host_argv(self, host, argv):
        """Return the command the agent runs to start ``argv`` on ``host`` (as is by default).

        A wrapper must keep the process's inherited file descriptors (the rank's rendezvous
        socket) and exec the command, as ``ip netns exec`` does.
        """
        return list(argv)

    def host_agent_argv(self, host):
        """Return the command that starts an agent on ``host`` with its stdio connected, or None.

        None (the default) means the site agent starts ``host``'s processes itself, through
        :meth:`host_argv`; a command (``ssh HOST ...``, ``pbsdsh -h HOST ...``) makes it start
        a host agent there and relay (:mod:`coc.launcher.hostagent`).
        """
        return None

    def listen_host(self, host):
        """Return the address engines on ``host`` listen on (``settings['listen']``, else loopback).

        ``"0.0.0.0"`` makes peers use the host's topology address on the network they share
        with it (:meth:`coc.launcher.plan.Plan.peers_for`).
        """
        return self.settings.get("listen") or "127.0.0.1"

    @abc.abstractmethod
    async def start(self, env):
        """Start the agent and return its ``asyncio.subprocess.Process``.

        The process's ``stdin`` and ``stdout`` must be pipes (the control channel); its
        stderr should reach ``coc-run``'s stderr so the agent's own failures are seen.
        ``env`` holds variables the agent needs beyond the site's own environment.
        """


from coc.launcher.spawners.local import LocalSpawner  # noqa: E402  (registered below)
from coc.launcher.spawners.mpiexec import MpiexecSpawner  # noqa: E402
from coc.launcher.spawners.netns import NetnsSpawner  # noqa: E402
from coc.launcher.spawners.pbs import PbsSpawner  # noqa: E402
from coc.launcher.spawners.slurm import SlurmSpawner  # noqa: E402
from coc.launcher.spawners.ssh import SshSpawner  # noqa: E402

#: Spawners available now, by kind.
SPAWNERS = {cls.kind: cls for cls in (LocalSpawner, SshSpawner, NetnsSpawner, PbsSpawner,
                                      SlurmSpawner, MpiexecSpawner)}

#: Spawner kinds a topology may name that arrive with the launcher's second phase.
PLANNED = ()


def spawner_for(kind, site, settings=None, topology=None):
    """Return a spawner of ``kind`` for ``site``, or raise LaunchError naming what exists."""
    if kind in SPAWNERS:
        return SPAWNERS[kind](site, settings, topology)
    available = ", ".join(sorted(SPAWNERS))
    if kind in PLANNED:
        raise LaunchError(f"spawner {kind!r} is not available yet (available: {available})",
                          site=site)
    known = ", ".join(dict.fromkeys([*SPAWNERS, *PLANNED]))
    raise LaunchError(f"unknown spawner {kind!r} (known: {known})",
                      site=site)
