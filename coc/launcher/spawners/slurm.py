"""The ``slurm`` spawner: the site's agent runs as a one-task job step (``srun``) of the allocation.

``coc-run`` runs inside a Slurm allocation (``salloc``, ``sbatch``); the allocation's hosts and
slots reach the placement through :func:`coc.launcher.environment.scheduler_allocation`. The
agent is started with ``srun --nodes=1 --ntasks=1 --nodelist=NODE`` on the site's first
allocated node: srun's stdin and stdout are the control channel, so the agent (and every rank
and gateway daemon it starts, which belong to its step) is tracked, accounted and cleaned up
by Slurm like any task of the job. The site's other allocated nodes each get a *host agent*
(:mod:`coc.launcher.hostagent`) started the same way, as one more step, through which the
site agent starts and follows the processes placed there.
"""

import asyncio
import os
import shutil

from coc.errors import LaunchError
from coc.launcher import spawners
from coc.launcher.environment import scheduler_allocation

__all__ = ["SlurmSpawner", "srun_argv"]


def srun_argv(srun, site, command, environ, node=None):
    """Return the ``srun`` command line that runs ``command`` as the site's agent step.

    ``--kill-on-bad-exit`` ends the step when the agent fails; ``--overlap`` lets the steps of
    several sites share a node of one allocation; ``--unbuffered`` makes srun pass the
    channel's bytes on as they come (by default it holds them until a newline); ``--quiet``
    keeps srun's own
    progress messages out of coc-run's stderr; the step takes the whole allocation's CPUs
    of its node when ``SLURM_CPUS_ON_NODE`` says how many, so its ranks are not squeezed
    onto one core.

    Examples
    --------
    >>> srun_argv("srun", "a", ["python", "-m", "coc.launcher.agent"],
    ...           {"SLURM_CPUS_ON_NODE": "4"})        # doctest: +NORMALIZE_WHITESPACE
    ['srun', '--nodes=1', '--ntasks=1', '--cpus-per-task=4', '--overlap',
     '--kill-on-bad-exit=1', '--unbuffered', '--quiet', '--job-name=coc-agent-a',
     'python', '-m', 'coc.launcher.agent']
    """
    cpus = environ.get("SLURM_CPUS_ON_NODE", "")
    return [srun, "--nodes=1", "--ntasks=1", *([f"--nodelist={node}"] if node else []),
            *([f"--cpus-per-task={cpus}"] if cpus.isdigit() else []),
            "--overlap", "--kill-on-bad-exit=1", "--unbuffered", "--quiet",
            f"--job-name=coc-agent-{site}", *command]


class SlurmSpawner(spawners.Spawner):
    """Start the agent with ``srun`` inside the allocation ``coc-run`` runs in."""

    kind = "slurm"

    def allocated_hosts(self):
        """Return the site's topology hosts that the allocation holds, in allocation order."""
        allocation = scheduler_allocation()
        if allocation is None or self.topology is None:
            return []
        return [host for host, _ in allocation.hosts if host in self.topology
                and self.topology.nodes[host].get("site") == self.site]

    def _srun(self):
        srun = shutil.which("srun")
        if srun is None:
            raise LaunchError("spawner 'slurm': srun is not on PATH", site=self.site)
        return srun

    def host_agent_argv(self, host):
        """Return the srun step that starts a host agent on another allocated node, or None.

        Hosts outside the allocation (a gateway host of the site, say) run in the site
        agent's own step.
        """
        allocated = self.allocated_hosts()
        if host not in allocated[1:]:
            return None
        return srun_argv(self._srun(), f"{self.site}-{host}", self.agent_argv(), os.environ,
                         host)

    async def start(self, env):
        """Start the agent as a job step; raise LaunchError outside an allocation."""
        if not (os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID")):
            raise LaunchError("spawner 'slurm' needs a Slurm allocation (SLURM_JOB_ID is not "
                              "set): run coc-run under salloc or in an sbatch script",
                              site=self.site)
        return await asyncio.create_subprocess_exec(
            *srun_argv(self._srun(), self.site, self.agent_argv(), os.environ,
                       next(iter(self.allocated_hosts()), None)),
            env={**os.environ, **env}, start_new_session=True,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
