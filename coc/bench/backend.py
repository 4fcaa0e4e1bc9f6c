"""The communicator a benchmark measures: coc under ``coc-run`` or mpi4py under ``mpiexec``.

The measurement code only uses mpi4py's method names (``Send``, ``Recv``, ``Isend``,
``Irecv``, ``Barrier``, ``Bcast``, ``Allreduce``, ``Alltoall``, ``allgather``, ``gather``,
``bcast``), which coc's :class:`~coc.comm.Communicator` also has, so one code path measures
both. This module opens the right one and says where every rank runs (site and host), from
which :func:`classify` tells within-host, within-site and across-site pairs apart.
"""

import os
from dataclasses import dataclass, field

from coc.errors import CocError

__all__ = ["Backend", "open_backend", "detect", "classify", "pairs_by_class", "group_class",
           "CLASSES"]

#: Where two ranks are relative to each other, nearest first.
CLASSES = ("host", "site", "wan")

# Variables a launcher of an MPI library sets in every rank (Hydra/MPICH, Open MPI, Slurm).
_MPI_LAUNCH_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE")


@dataclass
class Backend:
    """One rank's communicator and what it knows of the job."""

    name: str                 # "coc" or "mpi4py"
    comm: object              # mpi4py-like communicator
    rank: int
    size: int
    library: str              # version text for the report
    locations: list = field(default_factory=list)  # [(site, host)] of every rank

    def where(self, rank):
        """Return ``(site, host)`` of ``rank``."""
        return self.locations[rank]


def detect():
    """Return the backend a rank started by the current launcher should use.

    ``coc-run`` hands every rank ``COC_CONTROL_FD``; an MPI launcher sets PMI/PMIx variables.
    A process started by hand gets coc (a world of one rank).
    """
    if "COC_CONTROL_FD" in os.environ:
        return "coc"
    if any(v in os.environ for v in _MPI_LAUNCH_VARIABLES):
        return "mpi4py"
    return "coc"


def open_backend(name="auto"):
    """Join the job through ``name`` ("coc", "mpi4py" or "auto") and learn every rank's place.

    The site and host of a rank are ``COC_SITE``/``COC_HOST`` when set (``coc-run`` sets
    them; set them per rank under ``mpiexec`` to label ranks), else coc's own placement, else
    the MPI processor name as host on one site called ``mpi``.
    """
    name = detect() if name == "auto" else name
    if name == "coc":
        import coc
        comm = coc.init()
        library = f"coc {coc.__version__}"
        site, host = comm.site, comm.host
    elif name == "mpi4py":
        try:
            import mpi4py
            from mpi4py import MPI
        except ImportError as exc:
            raise CocError("--backend mpi4py needs mpi4py (pip install mpich mpi4py)") from exc
        comm = MPI.COMM_WORLD
        library = (f"mpi4py {mpi4py.__version__}, "
                   f"{' '.join(MPI.Get_library_version().split()[:3])}")
        site, host = "mpi", MPI.Get_processor_name()
    else:
        raise CocError(f"unknown backend {name!r}: expected coc, mpi4py or auto")
    site = os.environ.get("COC_SITE", site)
    host = os.environ.get("COC_HOST", host)
    rank, size = comm.Get_rank(), comm.Get_size()
    locations = [tuple(x) for x in comm.allgather((site, host))]
    return Backend(name, comm, rank, size, library, locations)


def classify(locations, a, b):
    """Return where ranks ``a`` and ``b`` are relative to each other: host, site or wan.

    Examples
    --------
    >>> where = [("a", "a1"), ("a", "a1"), ("a", "a2"), ("b", "b1")]
    >>> classify(where, 0, 1), classify(where, 0, 2), classify(where, 0, 3)
    ('host', 'site', 'wan')
    """
    (site_a, host_a), (site_b, host_b) = locations[a], locations[b]
    if site_a != site_b:
        return "wan"
    return "host" if host_a == host_b else "site"


def pairs_by_class(locations):
    """Return ``{class: [(a, b), ...]}``: disjoint pairs of ranks for each class present.

    Pairs are formed greedily from the lowest ranks, so the first pair of each class is the
    representative one (PingPong, PingPing) and all of them together load the network at
    once (Isend).

    Examples
    --------
    >>> where = [("a", "a1"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b1")]
    >>> pairs_by_class(where)
    {'host': [(0, 1), (3, 4)], 'site': [(0, 2)], 'wan': [(0, 3), (1, 4)]}
    """
    out = {}
    for cls in CLASSES:
        used, pairs = set(), []
        for a in range(len(locations)):
            if a in used:
                continue
            for b in range(a + 1, len(locations)):
                if b not in used and classify(locations, a, b) == cls:
                    pairs.append((a, b))
                    used.update((a, b))
                    break
        if pairs:
            out[cls] = pairs
    return out


def group_class(locations):
    """Return the widest class among all ranks: what a collective over all of them crosses.

    Examples
    --------
    >>> group_class([("a", "a1"), ("a", "a2")]), group_class([("a", "a1"), ("b", "b1")])
    ('site', 'wan')
    """
    classes = {classify(locations, 0, r) for r in range(1, len(locations))}
    return max(classes, key=CLASSES.index, default="host")
