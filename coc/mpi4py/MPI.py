"""``from mpi4py import MPI`` under ``coc-run --mpi4py``: mpi4py's module namespace on coc.

The names a program uses are here with mpi4py's meaning (constants, datatypes, operations,
``Status``, ``Request``, ``Message``, communicators, groups, errors, ``Wtime``); a name of
mpi4py's that coc does not provide raises ``NotImplementedError`` naming it. The job is
joined on first use of ``COMM_WORLD``/``COMM_SELF`` (or ``Init``), not at import.
"""

import os as _os
import socket as _socket
import threading as _threading

from coc.comm import world as _world
from coc.comm.buffers import IN_PLACE
from coc.comm.communicator import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED
from coc.mpi4py import _known, communicators, datatypes, errors, ops
from coc.mpi4py.communicators import (  # noqa: F401 - the module's namespace
    APPNUM, COMM_NULL, COMM_SELF, COMM_TYPE_SHARED, COMM_WORLD, CONGRUENT, ERRHANDLER_NULL,
    ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, GROUP_EMPTY, GROUP_NULL, IDENT, INFO_NULL,
    IO, KEYVAL_INVALID, SIMILAR, TAG_UB, UNEQUAL, UNIVERSE_SIZE, WTIME_IS_GLOBAL, Comm,
    Errhandler, Group, Intracomm)
from coc.mpi4py.datatypes import Datatype
from coc.mpi4py.errors import Exception  # noqa: A004 - mpi4py's name
from coc.mpi4py.ops import Op
from coc.mpi4py.requests import MESSAGE_NULL, REQUEST_NULL, Message, Request, Status

globals().update(datatypes.instances())
globals().update(ops.PREDEFINED)
globals().update(errors.CODES)

THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = range(4)
#: coc's communicators are not safe to call from several threads at once.
_THREAD_LEVEL = THREAD_SERIALIZED
VERSION, SUBVERSION = 3, 1
MAX_PROCESSOR_NAME = MAX_ERROR_STRING = MAX_OBJECT_NAME = 256
MAX_LIBRARY_VERSION_STRING = 8192
ROOT = -3
_MAIN = _threading.main_thread()


def Init():
    """Join the job now (otherwise the first use of ``COMM_WORLD`` does)."""
    communicators._join()


def Init_thread(required=THREAD_MULTIPLE):
    """Join the job; return the thread level provided (``THREAD_SERIALIZED``)."""
    Init()
    return min(required, _THREAD_LEVEL)


def Query_thread():
    """Return the thread level provided (``THREAD_SERIALIZED``)."""
    return _THREAD_LEVEL


def Is_thread_main():
    """Return True in the thread that imported the module (the main thread)."""
    return _threading.current_thread() is _MAIN


def Finalize():
    """Wait (bounded) for every rank, then leave the job (also at exit)."""
    _world.finalize()


def Is_initialized():
    """Return True: as with mpi4py, importing ``MPI`` initialises it (the join is lazy)."""
    return True


def Is_finalized():
    """Return True after :func:`Finalize`."""
    return _world._state["finalized"]


def Get_processor_name():
    """Return the name of the host this rank runs on (the topology's host name)."""
    return _os.environ.get("COC_HOST") or _socket.gethostname()


def Get_version():
    """Return the MPI version whose semantics this follows: ``(3, 1)``."""
    return VERSION, SUBVERSION


def Get_library_version():
    """Return a line naming coc's compatibility layer."""
    from coc import __version__
    return f"coc {__version__} (mpi4py compatibility mode)"


def get_vendor():
    """Return ``("coc", version tuple)``."""
    from coc import __version__
    return "coc", tuple(int(p) for p in __version__.split("."))


def Get_error_class(errorcode):
    """Return the error class of ``errorcode`` (classes are their own codes)."""
    return errorcode


def Get_error_string(errorcode):
    """Return the text of an error class."""
    return errors.error_string(errorcode)


def Wtime():
    """Return wall-clock seconds (high resolution)."""
    return _world.Wtime()


def Wtick():
    """Return the resolution of :func:`Wtime`."""
    return _world.Wtick()


def Pcontrol(level):
    """Accept a profiling level (MPI defines it as a hint with no required effect)."""


def Compute_dims(nnodes, dims):
    """Return a balanced split of ``nnodes`` over ``dims`` dimensions (``MPI_Dims_create``).

    ``dims`` is a count or a list whose non-zero entries are kept.

    Examples
    --------
    >>> Compute_dims(6, 2), Compute_dims(12, [0, 3, 0])
    ([3, 2], [2, 3, 2])
    """
    dims = [0] * dims if isinstance(dims, int) else list(dims)
    fixed = 1
    for d in dims:
        fixed *= d or 1
    if nnodes % fixed:
        raise Exception(errors.CODES["ERR_DIMS"], f"{nnodes} nodes do not divide by the "
                        f"fixed dimensions {dims}")
    free = [i for i, d in enumerate(dims) if d == 0]
    rest, factors = nnodes // fixed, []
    p = 2
    while rest > 1:                       # prime factors, largest first into the emptiest
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    sizes = [1] * len(free)
    for f in sorted(factors, reverse=True):
        sizes[sizes.index(min(sizes))] *= f
    for i, size in zip(free, sorted(sizes, reverse=True)):
        dims[i] = size
    return dims


def __getattr__(name):
    raise _known.unsupported("MPI", name)


def __dir__():
    return sorted(set(globals()))


__all__ = sorted(set(globals()) & _known.KNOWN["MPI"])
