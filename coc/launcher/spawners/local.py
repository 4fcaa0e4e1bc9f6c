"""The ``local`` spawner: the site's agent is a subprocess of ``coc-run`` on this machine."""

import asyncio
import os

from coc.launcher import spawners

__all__ = ["LocalSpawner"]


class LocalSpawner(spawners.Spawner):
    """Start the agent as a local process in its own session, talking over pipes."""

    kind = "local"

    async def start(self, env):
        """Start the agent here in its own session: Ctrl-C at a terminal reaches only coc-run."""
        return await asyncio.create_subprocess_exec(
            *self.agent_argv(), env={**os.environ, **env}, start_new_session=True,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
