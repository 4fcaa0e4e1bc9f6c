"""The ``ssh`` spawner: the site's agent runs on its login host, reached with OpenSSH.

``coc-run`` runs the system ``ssh`` client in batch mode (never a password prompt) with
``ProxyJump`` when the site is reachable only through another host; ssh's stdin and stdout
are the agent's control channel, so the job's secret travels inside the ssh connection and
never on a command line. The agent starts the site's processes on the login host itself, and
on the site's other hosts through host agents it starts there with ssh (or through the site's
``host_exec`` command when one is set). ssh's own messages reach
``coc-run``'s stderr prefixed with the site and host, and a lost connection ends the job
(ssh exits 255, the agent's channel closes).

Site settings (docs/launcher.md, "Site profiles"): ``login`` (a topology host, else any ssh
destination), ``ssh_host`` (what ssh connects to, default the login host's ``hostname``),
``user``, ``port``, ``jump`` (``ProxyJump``: ``[user@]host[:port]``, comma-separated for
several), ``identity``, ``ssh_config`` (``-F``), ``ssh_options`` (``-o`` values), ``python``,
``workdir``, ``host_exec`` and ``listen``.
"""

import asyncio
import os
import shlex
import sys

from coc.errors import LaunchError
from coc.launcher import spawners
from coc.launcher.spawners.netns import topology_listen_host
from coc.pycommand import python_argv

__all__ = ["SshSpawner", "ssh_command"]

#: Options every connection gets: no prompts, a bounded connect, a dead peer noticed in ~15 s.
BASE_OPTIONS = ("BatchMode=yes", "ConnectTimeout=10", "ServerAliveInterval=5",
                "ServerAliveCountMax=3")


def ssh_command(destination, remote, settings):
    """Return the ``ssh`` argv that runs ``remote`` (a list of words) on ``destination``.

    Examples
    --------
    >>> ssh_command("login.b.org", ["python3", "-m", "coc.launcher.agent"],
    ...             {"jump": "gw.b.org", "port": 2222})      # doctest: +NORMALIZE_WHITESPACE
    ['ssh', '-T', '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', '-o',
     'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=3', '-J', 'gw.b.org', '-p', '2222',
     '--', 'login.b.org', 'python3 -m coc.launcher.agent']

    The destination comes after ``--``, so ssh never reads it as an option (the topology
    validator also refuses hostnames and logins that begin with ``-``).
    """
    argv = ["ssh", "-T"]
    if settings.get("ssh_config"):
        argv += ["-F", str(settings["ssh_config"])]
    for option in (*BASE_OPTIONS, *settings.get("ssh_options", ())):
        argv += ["-o", option]
    for flag, key in (("-J", "jump"), ("-p", "port"), ("-i", "identity"), ("-l", "user")):
        if settings.get(key):
            argv += [flag, str(settings[key])]
    return [*argv, "--", destination, shlex.join(remote)]


class SshSpawner(spawners.Spawner):
    """Start the site's agent on its login host over ssh; ssh's stdio is the channel."""

    kind = "ssh"

    def __init__(self, site, settings=None, topology=None):
        super().__init__(site, settings, topology)
        if not self.settings.get("login"):
            raise LaunchError("the ssh spawner needs the site's login host (topology 'login:' "
                              "or the profile's 'login')", site=site)

    @property
    def agent_host(self):
        """Return the topology host the agent runs on, or None when ``login`` is not one."""
        login = self.settings.get("login")
        return login if self.topology is not None and login in self.topology else None

    @property
    def destination(self):
        """Return what ssh connects to: ``ssh_host``, else the login host's hostname."""
        login = self.settings["login"]
        if self.settings.get("ssh_host"):
            return str(self.settings["ssh_host"])
        return self.topology.nodes[login].get("hostname", login) if self.agent_host else login

    def remote_command(self, agent):
        """Return the words that run ``agent`` on a host of the site, in ``workdir`` if set."""
        if self.settings.get("workdir"):
            return ["sh", "-c", f"cd {shlex.quote(str(self.settings['workdir']))} && exec "
                                f"{shlex.join(agent)}"]
        return agent

    async def start(self, env):
        """Run ssh to the login host in its own session; its stderr is relayed with a prefix."""
        argv = ssh_command(self.destination, self.remote_command(self.agent_argv()),
                           self.settings)
        process = await asyncio.create_subprocess_exec(
            *argv, env={**os.environ, **env}, start_new_session=True,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        process.relay = asyncio.ensure_future(self._relay_stderr(process))
        return process

    async def _relay_stderr(self, process):
        """Copy ssh's (and the agent's) stderr to coc-run's, naming site and host.

        ssh ends with status 255 when the connection fails or is lost: say so.
        """
        prefix = f"coc-run: site {self.site} (ssh {self.destination}): "
        while line := await process.stderr.readline():
            sys.stderr.write(prefix + line.decode(errors="replace").rstrip("\n") + "\n")
            sys.stderr.flush()
        if await process.wait() == 255:
            print(f"{prefix}connection failed or lost (ssh exit status 255)",
                  file=sys.stderr, flush=True)

    def host_argv(self, host, argv):
        """Return ``argv`` prefixed by the site's ``host_exec`` when one is set, else as is.

        ``host_exec`` is a command template with ``{host}`` (topology name) and
        ``{hostname}``; it must exec the command with inherited descriptors.
        """
        template = self.settings.get("host_exec")
        if not template or host == self.agent_host:
            return list(argv)
        hostname = self.topology.nodes[host].get("hostname", host)
        return [*shlex.split(template.format(host=host, hostname=hostname)), *argv]

    def host_agent_argv(self, host):
        """Return ``ssh HOST python -m coc.launcher.agent`` for hosts other than the login host.

        Used unless the site has ``host_exec``; the login host reaches its compute hosts by
        their ``hostname`` with the site's ssh settings (but not ``jump``, ``port`` or
        ``ssh_host``, which are about reaching the login host).
        """
        if self.settings.get("host_exec") or self.agent_host in (None, host):
            return None
        inner = {key: self.settings[key] for key in ("ssh_config", "ssh_options", "identity",
                                                     "user") if key in self.settings}
        return ssh_command(self.topology.nodes[host].get("hostname", host),
                           self.remote_command(python_argv(spawners.AGENT_MODULE,
                                                           python=self.python)),
                           inner)

    def listen_host(self, host):
        """Return the host's topology address (``0.0.0.0`` with several interfaces)."""
        return self.settings.get("listen") or topology_listen_host(self.topology, host)
