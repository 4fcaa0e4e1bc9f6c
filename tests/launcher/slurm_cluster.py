"""A real one-machine Slurm cluster for tests: munged, slurmctld and slurmd under a temp dir.

:func:`start_cluster` installs Debian's ``slurm-wlm`` and ``munge`` with apt-get when they are
missing (root only), makes a munge key for the run, writes a ``slurm.conf`` for one or more
nodes (all this machine, on loopback, each its own ``slurmd -N NODE`` and port, which
Debian's Slurm allows; no cgroups: ``proctrack/linuxproc`` and ``task/none``) with its state,
spool, logs and sockets under one directory, and starts the daemons in the foreground as
children of the test process, so they are stopped by pid (and die with it). ``SLURM_CONF`` in
:attr:`SlurmCluster.env` points ``salloc``, ``srun`` and ``sinfo`` at it.

Run it by hand with ``python tests/launcher/slurm_cluster.py`` (starts, runs ``srun hostname``,
stops).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from coc.childprocess import die_with_parent

__all__ = ["SlurmCluster", "missing_reason", "start_cluster"]

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
PACKAGES = ["slurm-wlm", "munge"]
START_TIMEOUT = 45.0          # seconds for the node to become idle
#: CPUs the node claims (more than this machine has: Slurm trusts slurm.conf with
#: ``SlurmdParameters=config_overrides``), so allocations of 4-8 tasks fit.
NODE_CPUS = 8

_CONF = """\
ClusterName=coctest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=1
MinJobAge=5
{nodes}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
{partitions}"""
_NODE = "NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} " \
        "State=UNKNOWN"


def missing_reason(install=True):
    """Return why a Slurm cluster cannot run here, or None (installing packages if allowed)."""
    if all(os.access(path, os.X_OK) for path in DAEMONS.values()):
        return None
    if os.geteuid() != 0:
        return "Slurm and munge are not installed and installing them needs root"
    if not install or shutil.which("apt-get") is None:
        return "Slurm and munge are not installed (apt-get install slurm-wlm munge)"
    result = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, capture_output=True,
        text=True, timeout=600)
    if result.returncode != 0:
        return f"apt-get install {' '.join(PACKAGES)} failed: {result.stderr[-500:]}"
    return missing_reason(install=False)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    """The daemons of a one-node Slurm cluster, their files, and the environment to reach it."""

    def __init__(self, root, nodes=None, partitions=None):
        self.root = Path(root)
        self.host = socket.gethostname().split(".")[0]
        #: Slurm node names; the first is this machine's hostname.
        self.nodes = list(nodes or [self.host])
        #: {partition: [node, ...]} besides the default partition ``debug`` of every node
        self.partitions = dict(partitions or {})
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.processes = {}

    def write_files(self):
        """Write the munge key and slurm.conf, and make the state and spool directories."""
        for sub in ("state", "munge", *(f"spool-{node}" for node in self.nodes)):
            (self.root / sub).mkdir(mode=0o700, exist_ok=True)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        nodes = "\n".join(_NODE.format(name=node, host=self.host, port=_free_port(),
                                        cpus=NODE_CPUS) for node in self.nodes)
        self.conf.write_text(_CONF.format(host=self.host, root=self.root, nodes=nodes,
                                          names=",".join(self.nodes), ctld_port=_free_port(),
                                          partitions="".join(
                                              f"PartitionName={name} Nodes={','.join(nodes)} "
                                              "MaxTime=INFINITE State=UP OverSubscribe=YES\n"
                                              for name, nodes in self.partitions.items())))

    def _start(self, name, *args, label=None):
        label = label or name
        log = open(self.root / f"{label}.out", "wb")
        with log:
            self.processes[label] = subprocess.Popen(
                [DAEMONS[name], *args], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent)       # a killed test run leaves no daemon

    def start(self, timeout=START_TIMEOUT):
        """Start munged, slurmctld and slurmd; wait until the node is idle."""
        self.write_files()
        munge = self.root / "munge"
        self._start("munged", "--foreground", "--force", f"--socket={self.root}/munge.socket",
                    f"--key-file={munge}/munge.key", f"--log-file={munge}/munged.log",
                    f"--pid-file={munge}/munged.pid", f"--seed-file={munge}/munged.seed")
        self._wait(lambda: (self.root / "munge.socket").exists(), 10, "munged's socket")
        self._start("slurmctld", "-D", "-c", "-f", str(self.conf))
        for node in self.nodes:
            self._start("slurmd", "-D", "-f", str(self.conf), "-N", node,
                        label=f"slurmd-{node}")
        self._wait(self._idle, timeout, f"nodes {','.join(self.nodes)} to become idle")

    def _idle(self):
        result = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                                capture_output=True, text=True, timeout=10)
        states = result.stdout.split()    # a node once per partition it is in
        return len(states) >= len(self.nodes) and set(states) == {"idle"}

    def _wait(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [n for n, p in self.processes.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"{', '.join(dead)} exited" if dead else f"timeout after {timeout:g} s"
                raise RuntimeError(f"Slurm test cluster: waiting for {what}: {why}\n"
                                   + self.logs())
            time.sleep(0.2)

    def logs(self):
        """Return the tail of every daemon's log, to explain a failure."""
        parts = []
        for path in sorted(self.root.glob("*.out")) + sorted(self.root.glob("*.log")) + \
                sorted(self.root.glob("munge/*.log")):
            lines = path.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def step_daemons(self):
        """Return the pids of this cluster's ``slurmstepd`` (slurmd detaches them)."""
        mine = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for comm in Path("/proc").glob("[0-9]*/comm"):
            try:
                if comm.read_text().strip() == "slurmstepd" and \
                        mine in (comm.parent / "environ").read_bytes().split(b"\0"):
                    pids.append(int(comm.parent.name))
            except OSError:
                continue
        return pids

    def stop(self):
        """Stop the daemons by pid: SIGTERM, SIGKILL after 5 s; reap them; end stray steps."""
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(list(self.processes.values())):
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        for pid in self.step_daemons():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def start_cluster(root=None, nodes=None, partitions=None):
    """Start and return a :class:`SlurmCluster` in ``root`` (default: a new temp dir).

    ``nodes`` names its nodes (default: one, this machine's hostname); ``partitions``
    (``{name: [node, ...]}``) adds partitions besides ``debug``, which has every node.
    """
    cluster = SlurmCluster(root or tempfile.mkdtemp(prefix="coc-slurm-"), nodes, partitions)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


if __name__ == "__main__":
    reason = missing_reason()
    if reason:
        raise SystemExit(reason)
    started = time.monotonic()
    host = socket.gethostname().split(".")[0]
    cluster = start_cluster(nodes=[host, f"{host}-2"])
    print(f"up in {time.monotonic() - started:.1f} s: {cluster.root}")
    try:
        print(subprocess.run(["srun", "-N2", "-n2", "printenv", "SLURMD_NODENAME"],
                             env=cluster.env, capture_output=True, text=True, timeout=30))
    finally:
        cluster.stop()
