"""The communicator API: mpi4py-style point-to-point, collectives and communicators across sites.

``coc.init()`` returns the world :class:`Communicator`; see ``docs/api.md`` for the full
list and the table of mpi4py names.
"""

from coc.comm.buffers import IN_PLACE
from coc.comm.collectives import (CollectiveMismatchError, collective_algorithm,
                                  set_collective_algorithm)
from coc.comm.communicator import (ANY_SOURCE, ANY_TAG, MAX_TAG, PROC_NULL, UNDEFINED,
                                   Communicator)
from coc.comm.ops import (BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MAXLOC, MIN, MINLOC, PROD,
                          REPLACE, SUM, Op)
from coc.comm.pickling import set_unpickler, unpickler_mode
from coc.comm.request import Request, Status, testall, testany, waitall, waitany
from coc.comm.world import (Wtick, Wtime, counters, finalize, init, initialized,
                            reset_counters)

__all__ = ["init", "finalize", "initialized", "Wtime", "Wtick", "Communicator", "Request",
           "Status", "Op", "waitall", "waitany", "testall", "testany", "ANY_SOURCE",
           "ANY_TAG", "MAX_TAG", "PROC_NULL", "UNDEFINED", "IN_PLACE", "SUM", "PROD", "MIN",
           "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC", "REPLACE",
           "set_unpickler", "unpickler_mode", "set_collective_algorithm",
           "collective_algorithm", "CollectiveMismatchError", "counters", "reset_counters",
           "COMM_WORLD"]


def __getattr__(name: str) -> Communicator:
    if name == "COMM_WORLD":          # lazy: joining the job happens on first use
        return init()
    raise AttributeError(f"module 'coc.comm' has no attribute {name!r}")
