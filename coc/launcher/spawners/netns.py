"""The ``netns`` spawner: every host of the site runs in its testbed network namespace.

The testbed (``coc testbed up TOPOLOGY``, see docs/testbed.md) must be up: its name is the
site setting ``testbed`` (``coc-run --testbed NAME``), else the topology's name. The agent
runs in the namespace of the site's login host (else its first host) under
``ip netns exec``, whose stdio pipes are the control channel; it starts every rank and gateway
daemon with ``ip netns exec`` in its own host's namespace. Engines listen on their host's
topology address (``0.0.0.0`` on hosts with several interfaces, such as gateways), and no
namespace forwards IP, so traffic crosses sites only through the gateway daemons.
"""

import asyncio
import os
from functools import cached_property

from coc import testbed, topology
from coc.errors import LaunchError
from coc.launcher import spawners

__all__ = ["NetnsSpawner", "agent_host", "topology_listen_host"]


def agent_host(G, site, settings):
    """Return the host a site's agent runs on: its ``login`` setting, else its first host."""
    login = settings.get("login")
    if login:
        if login not in G or G.nodes[login].get("kind") != "host":
            raise LaunchError(f"login host {login!r} is not a host of the topology", site=site)
        return login
    return topology.hosts(G, site=site)[0]


def topology_listen_host(G, host):
    """Return what an engine on ``host`` listens on: its one address, else every interface.

    Examples
    --------
    >>> from coc.topology import load
    >>> G = load("two-sites")
    >>> topology_listen_host(G, "a1"), topology_listen_host(G, "a-gw")
    ('10.1.0.1', '0.0.0.0')
    """
    addresses = [d.get("address") for _, _, d in G.edges(host, data=True)
                 if d.get("kind") == "interface"]
    return addresses[0] if len(addresses) == 1 and addresses[0] else "0.0.0.0"


class NetnsSpawner(spawners.Spawner):
    """Start the site's agent and its processes in the testbed's network namespaces."""

    kind = "netns"

    @cached_property
    def testbed(self):
        """Return the :class:`coc.testbed.Testbed` the site runs in (it must be up)."""
        name = self.settings.get("testbed") or self.topology.graph.get("name")
        try:
            bed = testbed.attach(name)
        except testbed.TestbedError as exc:
            raise LaunchError(f"{exc}; build it first: coc testbed up "
                              f"{self.topology.graph.get('file') or name} --name {name} "
                              "(needs root)", site=self.site) from None
        missing = bed.missing()
        if missing:
            raise LaunchError(f"testbed {name!r} is broken: namespaces {', '.join(missing)} "
                              "are gone (coc testbed up again)", site=self.site)
        return bed

    async def start(self, env):
        """Start the agent in its host's namespace, in its own session, over pipes."""
        host = agent_host(self.topology, self.site, self.settings)
        return await asyncio.create_subprocess_exec(
            *self.testbed.argv(host, self.agent_argv()), env={**os.environ, **env},
            start_new_session=True, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)

    def host_argv(self, host, argv):
        """Return ``ip netns exec <host's namespace> argv``."""
        return self.testbed.argv(host, argv)

    def listen_host(self, host):
        """Return the host's topology address (``0.0.0.0`` with several interfaces)."""
        return self.settings.get("listen") or topology_listen_host(self.topology, host)
