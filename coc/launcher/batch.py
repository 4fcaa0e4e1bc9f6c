"""``coc-run --batch``: one batch job per site, each running the site's agent once it starts.

For every site whose settings name a ``scheduler`` (slurm, pbs, lsf, sge), ``coc-run``
renders a job script from the site's template (``launcher/<scheduler>.sh``, which users edit;
placeholders are ``${name}`` in lower case, see :data:`PLACEHOLDERS`) and starts, through the
site's own spawner (ssh to the login node, or locally), a *relay* instead of the agent:
``python -m coc.launcher.batch relay``. The relay listens on the login node, fills in its
address and a one-time token, submits the script, and waits. When the job starts, the
script runs ``python -m coc.launcher.batch connect``, which connects to the relay (compute
nodes reach their login node; they never need a route to ``coc-run``), proves the token and
becomes the site's agent with that connection as its stdio. From then on the relay copies
bytes between its stdio (the spawner's channel to ``coc-run``) and the connection: the
agent's ``hello`` reaches ``coc-run``, which has waited for every site's. ``stop``, ``kill``
or the channel closing before the job starts cancels the batch job (scancel, qdel, bkill).
"""

import asyncio
import contextlib
import os
import re
import secrets
import shlex
import socket
import string
import sys
from dataclasses import dataclass
from pathlib import Path

from coc.errors import CocError, LaunchError
from coc import protocol
from coc.launcher import agent, spawners
from coc.launcher.environment import scheduler_allocation
from coc.launcher.profiles import data_dir
from coc.launcher.spawners.ssh import ssh_command
from coc.pycommand import python_argv
from coc.ports import listen_socket

__all__ = ["SCHEDULERS", "PLACEHOLDERS", "ScriptTemplate", "batch_sites", "script_values",
           "render_script", "format_scripts", "BatchSpawner", "use_batch", "RELAY_MODULE"]

#: What a batch site's spawner starts on the login node.
RELAY_MODULE = "coc.launcher.batch"
#: Seconds the job's agent has to connect to the relay and prove its token, once connected.
_TOKEN_TIMEOUT = 10.0
_CALLBACK = "COC_BATCH_CALLBACK"
_TOKEN = "COC_BATCH_TOKEN"

#: Placeholders a template may use (docs/launcher.md prints this table).
PLACEHOLDERS = {
    "job_name": "coc-JOBID-SITE",
    "nodes": "hosts of the site the job uses (ranks or gateway daemons; not the login host)",
    "ntasks": "ranks on the site (at least 1)",
    "tasks_per_node": "most ranks on one host",
    "walltime": "the batch setting 'walltime' (default 01:00:00)",
    "options": "one directive line per other key of the site's 'batch' setting",
    "output": "the job's output file (JOB_NAME.out)",
    "setup": "the site's 'setup' lines (module load, ...)",
    "workdir": "the site's 'workdir' (default: where the job was submitted)",
    "python": "the site's Python",
    "connect": "the command that runs the job's agent with the site's Python",
    "callback": "host:port of the relay on the login node (filled in at submission)",
    "token": "the one-time token the job's agent proves (filled in at submission)",
}


@dataclass(frozen=True)
class Scheduler:
    """How to submit to and cancel in one batch system, and how its directives look."""

    name: str
    submit: tuple          # the command; the script's path is appended (or fed on stdin)
    cancel: tuple          # the command; the job id is appended
    job_id: str            # regular expression; group 1 is the id in the submit output
    directive: str         # prefix of a directive line
    flags: dict            # batch setting -> directive flag (others: the default form)
    default: str           # str.format form of other settings: {key}, {value}
    script_on_stdin: bool = False
    workdir: str = "."     # where the job starts when the site sets no workdir

    def options(self, settings):
        """Return the directive lines for the site's ``batch`` settings (all but walltime)."""
        lines = []
        for key, value in settings.items():
            if key == "walltime":
                continue
            form = self.flags.get(key, self.default)
            lines.append(f"{self.directive} {form.format(key=key, value=value)}")
        return "\n".join(lines)


SCHEDULERS = {s.name: s for s in (
    Scheduler("slurm", ("sbatch", "--parsable"), ("scancel",), r"^(\d+)", "#SBATCH",
              {}, "--{key}={value}"),
    Scheduler("pbs", ("qsub",), ("qdel",), r"^(\S+)", "#PBS",
              {"queue": "-q {value}", "account": "-A {value}"}, "-l {key}={value}",
              workdir="$PBS_O_WORKDIR"),
    Scheduler("lsf", ("bsub",), ("bkill",), r"Job <(\d+)>", "#BSUB",
              {"queue": "-q {value}", "account": "-P {value}", "project": "-P {value}"},
              "-{key} {value}", script_on_stdin=True),
    Scheduler("sge", ("qsub", "-terse"), ("qdel",), r"^(\d+)", "#$",
              {"queue": "-q {value}", "account": "-A {value}", "project": "-P {value}",
               "pe": "-pe {value}"}, "-l {key}={value}"),
)}


class ScriptTemplate(string.Template):
    """A job script template: only ``${lower_case}`` is a placeholder.

    Everything else a shell script says — ``$HOME``, ``${SLURM_JOB_ID}``, ``$$``,
    ``${X:-default}`` — is left as it is.

    Examples
    --------
    >>> ScriptTemplate("cd ${workdir} && echo $$ ${HOME:-/}").substitute(workdir="/w")
    'cd /w && echo $$ ${HOME:-/}'
    """

    flags = 0  # type: ignore[assignment]  # re.VERBOSE only: ${SLURM_JOB_ID} is the shell's
    pattern = r"""\$(?:(?P<escaped>(?!))|(?P<named>(?!))|{(?P<braced>[a-z_][a-z0-9_]*)}|
                  (?P<invalid>(?!)))"""  # type: ignore[assignment]  # compiled by Template


def batch_sites(plan):
    """Return the sites of ``plan`` whose settings name a scheduler, checking the name."""
    sites = []
    for site in plan.sites:
        name = plan.settings.get(site, {}).get("scheduler")
        if name is None:
            continue
        if name not in SCHEDULERS:
            raise LaunchError(f"unknown scheduler {name!r} (known: {', '.join(SCHEDULERS)})",
                              site=site)
        sites.append(site)
    return sites


def _template(site, settings):
    """Return (text, path) of the site's job script template."""
    name = settings.get("template") or f"{settings['scheduler']}.sh"
    path = Path(name)
    if not path.is_file():
        path = data_dir() / name
    try:
        return path.read_text(), path
    except OSError as exc:
        raise LaunchError(f"batch template {name}: {exc.strerror}", site=site) from None


def _login_host(settings, G):
    """Return the site's login host when it is a topology host (its processes run there)."""
    login = settings.get("login")
    return login if login in G else None


def script_values(plan, site):
    """Return the values of :data:`PLACEHOLDERS` for ``site``, callback and token left open."""
    settings = plan.settings[site]
    scheduler = SCHEDULERS[settings["scheduler"]]
    batch = dict(settings.get("batch") or {})
    ranks = [p for p in plan.placements if p.site == site]
    login = _login_host(settings, plan.topology)        # its processes are not in the job
    hosts = ({p.host for p in ranks} | {g.host for g in plan.gateways if g.site == site}) - \
        {login}
    per_host = [sum(p.host == h for p in ranks) for h in hosts]
    name = f"coc-{plan.job_id}-{site}"
    return {"job_name": name, "nodes": str(max(1, len(hosts))),
            "ntasks": str(max(1, len(ranks))), "tasks_per_node": str(max(per_host, default=1)),
            "walltime": str(batch.get("walltime", "01:00:00")),
            "options": scheduler.options(batch), "output": f"{name}.out",
            "setup": str(settings.get("setup") or "").rstrip("\n"),
            "workdir": str(settings.get("workdir") or scheduler.workdir),
            "python": plan.spawner(site).python,
            "connect": shlex.join(python_argv("coc.launcher.batch", "connect",
                                              python=plan.spawner(site).python))}


def render_script(text, values, where="template"):
    """Return the job script: ``text`` with every placeholder replaced by ``values``.

    Raises
    ------
    LaunchError
        Naming ``where`` and the placeholder it does not know.
    """
    try:
        return ScriptTemplate(text).substitute(values)
    except KeyError as exc:
        raise LaunchError(f"{where}: unknown placeholder ${{{exc.args[0]}}} (known: "
                          f"{', '.join(PLACEHOLDERS)})") from None


def _submit_command(site, settings):
    scheduler = SCHEDULERS[settings["scheduler"]]
    if settings.get("submit"):
        return shlex.split(str(settings["submit"]))
    return list(scheduler.submit)


def format_scripts(plan):
    """Return what ``--dry-run --batch`` prints after the plan: every site's job script."""
    parts = []
    for site in batch_sites(plan):
        settings = plan.settings[site]
        text, path = _template(site, settings)
        values = {**script_values(plan, site), "callback": "LOGIN-NODE:PORT",
                  "token": "TOKEN-MADE-AT-SUBMISSION"}
        parts.append(f"batch job for site {site} ({settings['scheduler']}, template {path}, "
                     f"submitted with: {shlex.join(_submit_command(site, settings))}):\n"
                     + render_script(text, values, str(path)).rstrip("\n") + "\n")
    return "".join(parts)


class BatchSpawner(spawners.Spawner):
    """Start a batch site's relay through the site's own spawner, then hand it the job script.

    The site's agent runs in the batch job, on its first node: the site's processes run
    there, listening on every interface (the agent tells peers the node's address), except
    those on the site's login host (a gateway daemon, say), which run under a host agent the
    job starts there with ssh.
    """

    def __init__(self, inner, message):
        super().__init__(inner.site, inner.settings, inner.topology)
        self.inner, self.message = inner, message
        self.kind = inner.kind

    async def start(self, env):
        """Start the relay on the login node and send it what to submit."""
        self.inner.agent_module = RELAY_MODULE
        process = await self.inner.start(env)
        process.stdin.write(protocol.encode(self.message))
        return process

    @property
    def _login(self):
        return _login_host(self.settings, self.topology)

    def host_agent_argv(self, host):
        """Return ssh to the login host for its processes; the job's own run in the job."""
        if host != self._login:
            return None
        hostname = self.topology.nodes[host].get("hostname", host)
        return ssh_command(hostname, python_argv(spawners.AGENT_MODULE, python=self.python),
                           {k: v for k, v in self.settings.items() if k == "user"})

    def listen_host(self, host):
        """Return the login host's address as its spawner says; every interface in the job."""
        return self.inner.listen_host(host) if host == self._login else "0.0.0.0"


#: How a batch job starts a program on another of its nodes with stdio connected.
IN_JOB_LAUNCHERS = {
    "slurm": lambda node: ["srun", "--nodes=1", "--ntasks=1", "--overlap", "--unbuffered",
                           "--quiet", f"--nodelist={node}"],
    "pbs": lambda node: ["pbsdsh", "-h", node, "--"],
    "lsf": lambda node: ["blaunch", node],
    "sge": lambda node: ["qrsh", "-inherit", node],
}


def spread(job, allocation):
    """Return ``job`` with its hosts mapped, in order, onto the batch job's nodes.

    The first host runs on this node (the job's first, where the agent runs); each further
    host gets a host agent on the next node, started with the scheduler's own launcher.

    Examples
    --------
    >>> from coc.launcher.environment import Allocation
    >>> job = {"hosts": {}, "gateways": [], "ranks": [{"host": "b1"}, {"host": "b2"}]}
    >>> spread(job, Allocation("slurm", "7", (("n1", 2), ("n2", 2))))["hosts"]["b2"][:7]
    ['srun', '--nodes=1', '--ntasks=1', '--overlap', '--unbuffered', '--quiet', '--nodelist=n2']
    """
    nodes = [node for node, _ in allocation.hosts]
    used = [item["host"] for key in ("gateways", "ranks") for item in job.get(key, ())
            if item["host"] not in job.get("hosts", {})]
    hosts = dict(job.get("hosts") or {})
    for i, host in enumerate(dict.fromkeys(used)):
        node = nodes[i % len(nodes)]
        if node != nodes[0]:
            hosts[host] = [*IN_JOB_LAUNCHERS[allocation.scheduler](node),
                           *python_argv(spawners.AGENT_MODULE)]
    return {**job, "hosts": hosts}


class _JobAgent(agent.Agent):
    """The agent inside a batch job: spreads the site over the job's nodes, names its address.

    Peers learn its node's address, not ``0.0.0.0``: the one its connection to the relay on
    the login node leaves from, so the site's hosts can reach it.
    """

    async def start_job(self, job):
        allocation = scheduler_allocation()
        if allocation is not None and len(allocation.hosts) > 1:
            job = spread(job, allocation)
        await super().start_job(job)

    async def send(self, message):
        key = ("rank", message["rank"]) if "rank" in message else \
            ("gateway", message.get("gateway"))
        if message.get("type") == "address" and key in {(c.kind, c.ident)
                                                         for c in self.children}:
            node = self.writer.get_extra_info("sockname")[0]
            message = {**message, "address": message["address"].replace(
                "tcp://0.0.0.0:", f"tcp://{node}:")}
        await super().send(message)


def use_batch(plan):
    """Make every batch site of ``plan`` start through a relay that submits its job script."""
    for site in batch_sites(plan):
        settings = plan.settings[site]
        text, path = _template(site, settings)
        values = script_values(plan, site)
        render_script(text, {**values, "callback": "", "token": ""}, str(path))  # check now
        scheduler = SCHEDULERS[settings["scheduler"]]
        plan.use_spawner(site, BatchSpawner(plan.spawner(site), {
            "type": "batch", "site": site, "template": text, "values": values,
            "name": values["job_name"], "submit": _submit_command(site, settings),
            "cancel": list(scheduler.cancel), "job_id": scheduler.job_id,
            "stdin": scheduler.script_on_stdin, "callback": settings.get("callback"),
            "port_range": _relay_ports(plan, site)}))


def _relay_ports(plan, site):
    """Return the port range the relay on ``site``'s login node listens in, or None (any)."""
    login = _login_host(plan.settings[site], plan.topology)
    if login is not None and login in plan.topology:
        return plan.port_range(login)
    given = plan.port_overrides.get(site) or plan.settings[site].get("port_range")
    return None if given is None else tuple(given)


# -- on the login node: the relay ----------------------------------------------------------------

def _say(site, text):
    print(f"coc-run --batch: site {site}: {text}", file=sys.stderr, flush=True)


async def _submit(order, script_path):
    """Submit the script; return the job id (raise LaunchError with the command's output)."""
    argv = [*order["submit"], *([] if order["stdin"] else [str(script_path)])]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=open(script_path, "rb") if order["stdin"] else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise LaunchError(f"cannot run {argv[0]!r}: {exc.strerror}", site=order["site"]) from None
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    text = out.decode(errors="replace").strip()
    match = re.search(order["job_id"], text, re.M)
    if proc.returncode != 0 or not match:
        raise LaunchError(f"{shlex.join(argv)} failed (exit {proc.returncode}): "
                          f"{(err.decode(errors='replace') or text).strip()}", site=order["site"])
    return match[1]


async def _cancel(order, job_id):
    with contextlib.suppress(OSError, asyncio.TimeoutError):
        proc = await asyncio.create_subprocess_exec(
            *order["cancel"], job_id, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.wait_for(proc.wait(), 30)


async def _pipe(reader, writer):
    """Copy bytes from ``reader`` to ``writer`` until EOF, then close the writer's side."""
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        else:
            writer.close()


async def relay():
    """Submit a site's job script and relay the control channel to the agent it starts."""
    up_reader, up_writer = await agent.open_channel()
    order = await protocol.read_message(up_reader)
    if order is None or order.get("type") != "batch":
        raise LaunchError("the relay expected a batch order first")
    site = order["site"]
    token = secrets.token_hex(16)
    connected = asyncio.get_running_loop().create_future()

    async def on_connect(reader, writer):
        try:
            hello = await asyncio.wait_for(protocol.read_message(reader), _TOKEN_TIMEOUT)
        except (asyncio.TimeoutError, CocError, ConnectionError):
            hello = None
        if (connected.done() or not hello or not secrets.compare_digest(
                str(hello.get("token")), token)):
            writer.close()          # not our job's agent: it learns nothing
            return
        connected.set_result((reader, writer))

    server = await asyncio.start_server(on_connect, sock=listen_socket(
        "0.0.0.0", order.get("port_range")))
    port = server.sockets[0].getsockname()[1]
    host = order.get("callback") or socket.getfqdn()
    workdir = Path(os.path.expandvars(order["values"].get("workdir", ".")))
    script = (workdir if workdir.is_dir() else Path.cwd()).resolve() / f"{order['name']}.sh"
    partial = script.with_name(f".{script.name}.partial")
    partial.touch(0o700)                     # the token goes in it: the user's eyes only
    partial.chmod(0o700)
    partial.write_text(render_script(order["template"], {
        **order["values"], "callback": f"{host}:{port}", "token": token}))
    os.replace(partial, script)              # whole, or not there
    job_id = await _submit(order, script)
    _say(site, f"submitted batch job {job_id} ({script}); waiting for it to start")
    from_launcher = asyncio.ensure_future(protocol.read_message(up_reader))
    await asyncio.wait([connected, from_launcher], return_when=asyncio.FIRST_COMPLETED)
    server.close()
    if not connected.done():                 # stop, kill, or coc-run gone: cancel the job
        connected.cancel()
        await _cancel(order, job_id)
        _say(site, f"batch job {job_id} cancelled before it started")
        return 1
    from_launcher.cancel()
    _say(site, f"batch job {job_id} started; its agent is connected")
    down_reader, down_writer = connected.result()
    await asyncio.gather(_pipe(up_reader, down_writer), _pipe(down_reader, up_writer))
    return 0


async def _connect():
    """Connect to the relay, prove the token, and serve as the site's agent over the socket."""
    host, _, port = os.environ.pop(_CALLBACK).rpartition(":")
    token = os.environ.pop(_TOKEN)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(
        host, int(port), limit=protocol.MAX_MESSAGE), 30)
    await protocol.send_message(writer, {"type": "batch-agent", "token": token})
    return await agent.serve(reader, writer, _JobAgent)


def connect():
    """In the batch job: become the site's agent, its control channel the relay's socket."""
    return asyncio.run(_connect())


def main(argv=None):
    """``python -m coc.launcher.batch [relay]`` on the login node, ``... connect`` in the job."""
    command = (sys.argv[1:] if argv is None else argv)[:1]
    if command == ["connect"]:
        return connect()
    if command in ([], ["relay"]):
        try:
            return asyncio.run(relay())
        except LaunchError as exc:
            print(f"coc-run --batch: error: {exc}", file=sys.stderr, flush=True)
            return 1
    print("usage: python -m coc.launcher.batch relay|connect", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
