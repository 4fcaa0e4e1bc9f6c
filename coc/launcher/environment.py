"""What a rank finds in its environment, and scheduler allocations mapped onto hosts and slots.

:data:`RANK_VARIABLES` is the table ``coc.init()`` reads; :func:`scheduler_allocation` turns
the variables a batch system sets inside a job (Slurm, PBS/Torque, LSF, SGE) into the same
shape ``--host`` gives: hosts and their slots.
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

from coc.errors import LaunchError
from coc.topology import hostlist

__all__ = ["RANK_VARIABLES", "rank_environment", "parse_exports", "Allocation",
           "scheduler_allocation"]

#: Variables every rank gets: name -> meaning (docs/launcher.md prints this table).
RANK_VARIABLES = {
    "COC_RANK": "this rank's number, 0 .. size-1",
    "COC_SIZE": "number of ranks in the job",
    "COC_SITE": "the site the rank runs on",
    "COC_HOST": "the topology host the rank runs on",
    "COC_LOCAL_RANK": "this rank's index among the ranks on its host",
    "COC_LOCAL_SIZE": "number of ranks on the rank's host",
    "COC_JOB_ID": "the job's identifier (also in coc-run's messages)",
    "COC_TOPOLOGY": "path of the topology file the job was placed on",
    "COC_CONTROL_FD": "inherited socket for the rendezvous (set by the site agent)",
    "PMI_RANK": "same as COC_RANK, for tools that read PMI variables",
    "PMI_SIZE": "same as COC_SIZE",
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def rank_environment(placement, size, job_id, topology_file):
    """Return the variables of :data:`RANK_VARIABLES` for one rank (all but the control fd).

    Examples
    --------
    >>> from coc.launcher.placement import Placement
    >>> env = rank_environment(Placement(3, "b", "b1", 1, 2), 4, "j1", "/t.yaml")
    >>> env["COC_RANK"], env["COC_SITE"], env["COC_LOCAL_SIZE"], env["PMI_SIZE"]
    ('3', 'b', '2', '4')
    """
    return {
        "COC_RANK": str(placement.rank), "COC_SIZE": str(size), "COC_SITE": placement.site,
        "COC_HOST": placement.host, "COC_LOCAL_RANK": str(placement.local_rank),
        "COC_LOCAL_SIZE": str(placement.local_size), "COC_JOB_ID": job_id,
        "COC_TOPOLOGY": str(topology_file or ""),
        "PMI_RANK": str(placement.rank), "PMI_SIZE": str(size),
    }


def parse_exports(items, environ=None):
    """Return ``{name: value}`` from ``-x VAR=VALUE`` and ``-x VAR`` (value from ``environ``).

    Examples
    --------
    >>> parse_exports(["A=1", "HOME"], {"HOME": "/root"})
    {'A': '1', 'HOME': '/root'}
    """
    environ = os.environ if environ is None else environ
    exports = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not _NAME.match(name):
            raise LaunchError(f"-x {item!r}: {name!r} is not a variable name")
        if not equals:
            if name not in environ:
                raise LaunchError(f"-x {name}: {name} is not set in coc-run's environment")
            value = environ[name]
        exports[name] = value
    return exports


@dataclass(frozen=True)
class Allocation:
    """Hosts and slots a batch scheduler gave the job coc-run runs in."""

    scheduler: str          # "slurm", "pbs", "lsf" or "sge"
    job_id: str
    hosts: tuple            # ((host, slots), ...) in the scheduler's order


def _counted(names):
    """Return ``((host, count), ...)`` for a list with one entry per slot, in first-seen order."""
    counts = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return tuple(counts.items())


def _read(path, variable):
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise LaunchError(f"{variable}={path}: cannot read it: {exc.strerror}") from None


def _slurm_counts(text, variable):
    """Expand Slurm's ``2(x3),1`` into ``[2, 2, 2, 1]``."""
    counts = []
    for item in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match:
            raise LaunchError(f"{variable}={text!r}: expected counts like '2(x3),1'")
        counts.extend([int(match[1])] * int(match[2] or 1))
    return counts


def _slurm(env):
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    names = hostlist.expand(nodelist)
    variable = next((v for v in ("SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE")
                     if env.get(v)), None)
    counts = _slurm_counts(env[variable], variable) if variable else [1] * len(names)
    if len(counts) != len(names):
        raise LaunchError(f"{variable}={env[variable]!r} gives {len(counts)} counts for "
                          f"{len(names)} hosts in {nodelist!r}")
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID", "")
    return Allocation("slurm", job_id, tuple(zip(names, counts)))


def _pbs(env):
    if not env.get("PBS_NODEFILE"):
        return None
    names = _read(env["PBS_NODEFILE"], "PBS_NODEFILE").split()
    return Allocation("pbs", env.get("PBS_JOBID", ""), _counted(names))


def _lsf(env):
    if env.get("LSB_MCPU_HOSTS"):
        words = env["LSB_MCPU_HOSTS"].split()
        if len(words) % 2 or not all(w.isdigit() for w in words[1::2]):
            raise LaunchError(f"LSB_MCPU_HOSTS={env['LSB_MCPU_HOSTS']!r}: expected "
                              "'host slots host slots ...'")
        hosts = tuple((host, int(n)) for host, n in zip(words[::2], words[1::2]))
    elif env.get("LSB_HOSTS"):
        hosts = _counted(env["LSB_HOSTS"].split())
    else:
        return None
    return Allocation("lsf", env.get("LSB_JOBID", ""), hosts)


def _sge(env):
    if not env.get("PE_HOSTFILE"):
        return None
    hosts = []
    for number, line in enumerate(_read(env["PE_HOSTFILE"], "PE_HOSTFILE").splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) < 2 or not words[1].isdigit():
            raise LaunchError(f"PE_HOSTFILE={env['PE_HOSTFILE']}:{number}: expected "
                              f"'host slots queue processors', got {line!r}")
        hosts.append((words[0], int(words[1])))
    return Allocation("sge", env.get("JOB_ID", ""), tuple(hosts))


def scheduler_allocation(environ=None):
    """Return the :class:`Allocation` of the batch job we run inside, or None outside one.

    Reads Slurm (``SLURM_JOB_NODELIST``, ``SLURM_TASKS_PER_NODE`` or
    ``SLURM_JOB_CPUS_PER_NODE``), PBS/Torque (``PBS_NODEFILE``), LSF (``LSB_MCPU_HOSTS`` or
    ``LSB_HOSTS``) and SGE (``PE_HOSTFILE``), in that order.

    Examples
    --------
    >>> scheduler_allocation({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-3]",
    ...                       "SLURM_TASKS_PER_NODE": "2(x2),1"})
    Allocation(scheduler='slurm', job_id='42', hosts=(('n1', 2), ('n2', 2), ('n3', 1)))
    >>> scheduler_allocation({}) is None
    True
    """
    environ = os.environ if environ is None else environ
    for reader in (_slurm, _pbs, _lsf, _sge):
        allocation = reader(environ)
        if allocation is not None:
            return allocation
    return None
