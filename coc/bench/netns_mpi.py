"""Plain MPICH across a testbed: one ``mpiexec``, each rank in its own host's namespace.

MPICH's ``mpiexec`` (Hydra) starts every rank locally; :func:`mpiexec_argv` puts this
module in front of the program, and each rank, knowing its number from ``PMI_RANK``, moves
into the namespace of its host (``ip netns exec``) before it becomes the program. The PMI
connection to ``mpiexec`` is an inherited file descriptor, so it survives the move, while
MPI's own traffic leaves through the host's interfaces only: shared memory is off
(``MPIR_CVAR_NOLOCAL``) and UCX's tcp transport uses the interfaces on the networks the
experiment names (``UCX_NET_DEVICES``; UCX, unlike the OFI tcp provider, uses several
interfaces of one host, which Bunyip's nodes need). This is MPICH over the same shaped
veths as coc — possible only where the topology is flat (every host reaches every other
directly).

Run as ``python -m coc.bench.netns_mpi SPEC -- PROGRAM ...`` it is that per-rank step;
``SPEC`` is ``namespace,device+device...,site,host`` per rank, joined by ``;``.
"""

import os
import shutil
import sys

from coc.errors import CocError
from coc.pycommand import python_argv

__all__ = ["MPICH_NETNS_ENV", "rank_spec", "mpiexec_argv", "main"]

# MPICH over TCP sockets only: no shared memory between ranks, UCX's tcp transport.
MPICH_NETNS_ENV = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ucx",
                   "UCX_TLS": "tcp,self"}


def rank_spec(bed, placement):
    """Return the SPEC for ``placement``: ``[(site, host, networks)]``, one per rank, in order.

    A rank uses its host's interfaces on ``networks`` (a collection of network names).

    Examples
    --------
    >>> class Bed:
    ...     def namespace(self, h): return f"coc:t:{h}"
    ...     def interfaces(self, h): return [{"dev": "eth0", "network": "lan"},
    ...                                      {"dev": "eth1", "network": "adm"}]
    >>> rank_spec(Bed(), [("s", "h1", ["lan"]), ("s", "h2", ["lan", "adm"])])
    'coc:t:h1,eth0,s,h1;coc:t:h2,eth0+eth1,s,h2'
    """
    out = []
    for site, host, networks in placement:
        devs = [i["dev"] for i in bed.interfaces(host) if i["network"] in networks]
        if not devs:
            raise CocError(f"host {host!r} has no interface on {', '.join(networks)}")
        out.append(",".join((bed.namespace(host), "+".join(devs), site, host)))
    return ";".join(out)


def mpiexec_argv(bed, placement, program):
    """Return the ``mpiexec`` command line that runs ``program`` with ranks on ``placement``."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise CocError("plain MPICH needs mpiexec and mpi4py (pip install mpich mpi4py)")
    return [mpiexec, "-n", str(len(placement)),
            *python_argv("coc.bench.netns_mpi"), rank_spec(bed, placement), "--", *program]


def main(argv=None):
    """Enter this rank's namespace with its interface and labels; exec the program."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m coc.bench.netns_mpi NS,IFACE,SITE,HOST;... -- PROGRAM ...",
              file=sys.stderr)
        return 2
    ranks = [r.split(",") for r in argv[0].split(";")]
    rank = int(os.environ.get("PMI_RANK", "-1"))
    if not 0 <= rank < len(ranks):
        print(f"coc.bench.netns_mpi: PMI_RANK {rank} outside the {len(ranks)} ranks given "
              "(start it under MPICH's mpiexec)", file=sys.stderr)
        return 2
    namespace, devices, site, host = ranks[rank]
    env = {**os.environ, **MPICH_NETNS_ENV, "UCX_NET_DEVICES": devices.replace("+", ","),
           "COC_SITE": site, "COC_HOST": host}
    os.execvpe("ip", ["ip", "netns", "exec", namespace, *argv[2:]], env)


if __name__ == "__main__":
    sys.exit(main())
