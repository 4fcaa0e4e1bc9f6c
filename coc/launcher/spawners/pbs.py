"""The ``pbs`` spawner: a PBS Pro / Torque site, with ``coc-run`` running inside the PBS job.

The job's hosts and slots come from ``PBS_NODEFILE``
(:func:`coc.launcher.environment.scheduler_allocation`, the one parser of it). The site's
agent runs here, on the job's first node (where PBS runs the job script and so
``coc-run``), as a local process; the site's processes on the job's other nodes run under
host agents started there with ``pbsdsh -h HOST`` (PBS's own task launcher, so PBS tracks
and cleans them up), or with ssh when the site sets ``host_agent: ssh``; hosts of the site
outside the job (its gateway host) are reached with ssh. Engines listen on
the hosts' topology addresses.
"""

import os
import shutil

from coc.errors import LaunchError
from coc.launcher import spawners
from coc.launcher.environment import scheduler_allocation
from coc.launcher.spawners.local import LocalSpawner
from coc.launcher.spawners.netns import topology_listen_host
from coc.launcher.spawners.ssh import ssh_command
from coc.pycommand import python_argv

__all__ = ["PbsSpawner", "pbsdsh_argv"]


def pbsdsh_argv(pbsdsh, hostname, command):
    """Return the ``pbsdsh`` command that runs ``command`` on the job's node ``hostname``.

    Examples
    --------
    >>> pbsdsh_argv("pbsdsh", "n7", ["python3", "-m", "coc.launcher.agent"])
    ['pbsdsh', '-h', 'n7', '--', 'python3', '-m', 'coc.launcher.agent']
    """
    return [pbsdsh, "-h", hostname, "--", *command]


class PbsSpawner(LocalSpawner):
    """Start the site's agent on the PBS job's first node, and host agents on the others."""

    kind = "pbs"

    def _allocation(self):
        allocation = scheduler_allocation()
        if allocation is None or allocation.scheduler != "pbs":
            raise LaunchError("spawner 'pbs' needs a PBS job (PBS_NODEFILE is not set): run "
                              "coc-run in a qsub script", site=self.site)
        return allocation

    def _host_of(self, hostname):
        """Return the topology host of this site named ``hostname`` (name or hostname)."""
        for host, attrs in self.topology.nodes(data=True):
            if attrs.get("site") == self.site and hostname in (host, attrs.get("hostname")):
                return host
        return None

    @property
    def agent_host(self):
        """Return the topology host the agent runs on: the job's first node of this site."""
        for hostname, _ in self._allocation().hosts:
            host = self._host_of(hostname)
            if host is not None:
                return host
        raise LaunchError("no host of PBS_NODEFILE belongs to this site", site=self.site)

    async def start(self, env):
        """Start the agent here (inside the job), after checking we are in one."""
        self._allocation()
        return await super().start(env)

    def host_agent_argv(self, host):
        """Return ``pbsdsh -h HOST -- python -m coc.launcher.agent`` for the job's other nodes.

        Hosts outside the job (a gateway host of the site, say) are reached with ssh.
        """
        if host == self.agent_host:
            return None
        hostname = self.topology.nodes[host].get("hostname", host)
        agent = python_argv(spawners.AGENT_MODULE, python=self.python)
        in_job = {self._host_of(name) for name, _ in self._allocation().hosts}
        if self.settings.get("host_agent") == "ssh" or host not in in_job:
            return ssh_command(hostname, agent, self.settings)
        pbsdsh = shutil.which("pbsdsh", path=os.environ.get("PATH"))
        if pbsdsh is None:
            raise LaunchError("spawner 'pbs': pbsdsh is not on PATH (or set 'host_agent: ssh' "
                              "in the site's profile)", site=self.site)
        return pbsdsh_argv(pbsdsh, hostname, agent)

    def listen_host(self, host):
        """Return the host's topology address (``0.0.0.0`` with several interfaces)."""
        return self.settings.get("listen") or topology_listen_host(self.topology, host)
