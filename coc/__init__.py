"""coc — one MPI-style parallel program across several clusters joined only by gateways.

``import coc`` stays cheap: the communicator API (:mod:`coc.comm`, which needs NumPy and
the engine) loads on first use of one of its names, and ``coc.COMM_WORLD`` joins the job
on first use.
"""

from typing import Any

from coc.errors import CocError  # noqa: F401

__version__ = "0.1.0"

_API = ("init", "finalize", "initialized", "Wtime", "Wtick", "COMM_WORLD", "Communicator",
        "Request", "Status", "Op", "ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED", "IN_PLACE", "SUM",
        "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MINLOC",
        "MAXLOC", "waitall", "waitany", "testall", "testany")

__all__ = ["CocError", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from coc import comm
        return getattr(comm, name)
    raise AttributeError(f"module 'coc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
