"""Spawners: how ``coc-run`` starts a site's agent, one small class per way a site starts programs.

A spawner does one thing: start ``python -m coc.launcher.agent`` on the site with the agent's
stdin and stdout connected back to ``coc-run`` (they are the control channel). Everything else
(ranks, gateway daemons, output, teardown) travels over that channel, so a new way of
reaching a site (ssh, ``srun``, ``pbsdsh``, the site's ``mpiexec``, a network namespace) is
one new subclass registered in :data:`SPAWNERS`.
"""

import abc
import sys

from coc.errors import LaunchError

__all__ = ["Spawner", "SPAWNERS", "PLANNED", "AGENT_MODULE", "spawner_for"]

#: The module every spawner starts on its site.
AGENT_MODULE = "coc.launcher.agent"


class Spawner(abc.ABC):
    """Start one site's agent; its stdio becomes the control channel.

    Parameters
    ----------
    site : str
        The site this spawner reaches.
    """

    #: The word naming this spawner in topology files and ``--spawner SITE=KIND``.
    kind = None

    def __init__(self, site):
        self.site = site

    def agent_argv(self):
        """Return the command that runs the agent on the site (the same Python by default)."""
        return [sys.executable, "-m", AGENT_MODULE]

    @abc.abstractmethod
    async def start(self, env):
        """Start the agent and return its ``asyncio.subprocess.Process``.

        The process's ``stdin`` and ``stdout`` must be pipes (the control channel); its
        stderr should reach ``coc-run``'s stderr so the agent's own failures are seen.
        ``env`` holds variables the agent needs beyond the site's own environment.
        """


from coc.launcher.spawners.local import LocalSpawner  # noqa: E402  (registered below)

#: Spawners available now, by kind.
SPAWNERS = {cls.kind: cls for cls in (LocalSpawner,)}

#: Spawner kinds a topology may name that arrive with the launcher's second phase.
PLANNED = ("ssh", "slurm", "pbs", "mpiexec", "netns")


def spawner_for(kind, site):
    """Return a spawner of ``kind`` for ``site``, or raise LaunchError naming what exists."""
    if kind in SPAWNERS:
        return SPAWNERS[kind](site)
    available = ", ".join(sorted(SPAWNERS))
    if kind in PLANNED:
        raise LaunchError(f"spawner {kind!r} is not available yet (available: {available})",
                          site=site)
    raise LaunchError(f"unknown spawner {kind!r} (known: {', '.join([*SPAWNERS, *PLANNED])})",
                      site=site)
