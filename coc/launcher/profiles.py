"""Site profiles: how to reach each site and how to submit to its scheduler, read from YAML.

A profile file (``coc-run --profile FILE|NAME``) holds ``sites: {SITE: {key: value}}``; the
keys are the site settings spawners and ``--batch`` read (docs/launcher.md, "Site profiles").
Names without a path are looked up in ``launcher/profiles/`` (shipped as
``coc.data.launcher``), so examples work after a plain ``pip install``.
"""

import importlib.resources
from pathlib import Path

from coc.errors import LaunchError, TopologyError
from coc.topology.yamlfile import read_yaml

__all__ = ["SETTINGS", "data_dir", "load_profile", "merge_settings"]

#: Every key a site may set, with what it means (docs/launcher.md prints this table).
SETTINGS = {
    "spawner": "how coc-run starts the site's agent (local, ssh, netns, pbs, slurm, mpiexec)",
    "login": "the host the agent runs on: a topology host, else an ssh destination",
    "ssh_host": "what ssh connects to (default: the login host's hostname)",
    "user": "ssh user name",
    "port": "ssh port",
    "jump": "ssh ProxyJump: [user@]host[:port], comma-separated for several",
    "identity": "ssh private key file",
    "ssh_config": "ssh configuration file (ssh -F)",
    "ssh_options": "list of extra ssh -o options",
    "python": "the Python on the site that runs the agent, gateway daemons and Python ranks",
    "workdir": "directory the agent (and so the ranks) start in",
    "host_exec": "command that starts a process on another host of the site ({host}, "
                 "{hostname}); it must keep inherited descriptors and exec",
    "host_agent": "pbs: how host agents start on the job's other nodes: pbsdsh (default) or ssh",
    "listen": "address engines listen on (default: loopback for local, else the topology "
              "address, 0.0.0.0 on hosts with several interfaces)",
    "testbed": "netns: the testbed's name (default: the topology's name)",
    "scheduler": "--batch: slurm, pbs, lsf or sge",
    "template": "--batch: the job script template (file or name in launcher/)",
    "submit": "--batch: the submit command (default: sbatch, qsub, bsub, qsub)",
    "batch": "--batch: placeholders for the template (account, partition, walltime, ...)",
    "setup": "--batch: shell lines run before the agent (module load, venv activation)",
    "callback": "--batch: the login node's name or address the job's agent connects back to "
                "(default: its fully qualified hostname)",
}


def data_dir():
    """Return the folder of ``launcher/`` files: the installed package, else the repository."""
    try:
        return Path(str(importlib.resources.files("coc.data.launcher")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "launcher"


def load_profile(name):
    """Return ``{site: settings}`` from a profile file, or a profile in ``launcher/profiles``.

    Examples
    --------
    >>> load_profile("two-slurm-clusters")["b"]["scheduler"]
    'slurm'
    """
    path = Path(name)
    if not path.is_file() and "/" not in name:
        path = data_dir() / "profiles" / f"{name}.yaml"
    try:
        text = path.read_text()
    except OSError as exc:
        shipped = sorted(p.stem for p in (data_dir() / "profiles").glob("*.yaml"))
        raise LaunchError(f"--profile {name}: {exc.strerror} (profiles shipped with coc: "
                          f"{', '.join(shipped)})") from None
    try:
        data = read_yaml(text, file=str(path))
    except TopologyError as exc:
        raise LaunchError(f"profile {exc}") from None
    sites = (data or {}).get("sites") if isinstance(data, dict) else None
    if not isinstance(sites, dict):
        raise LaunchError(f"profile {path}: expected 'sites: {{SITE: {{key: value}}}}'")
    for site, settings in sites.items():
        unknown = set(settings or {}) - set(SETTINGS)
        if unknown:
            raise LaunchError(f"profile {path}: site {site}: unknown keys "
                              f"{', '.join(sorted(unknown))} (known: {', '.join(SETTINGS)})")
    return {str(site): dict(settings or {}) for site, settings in sites.items()}


def merge_settings(*layers):
    """Return ``{site: settings}`` with later layers' keys winning, site by site.

    Examples
    --------
    >>> merge_settings({"a": {"login": "x", "user": "u"}}, {"a": {"login": "y"}})
    {'a': {'login': 'y', 'user': 'u'}}
    """
    merged = {}
    for layer in layers:
        for site, settings in layer.items():
            merged.setdefault(site, {}).update(settings)
    return merged
