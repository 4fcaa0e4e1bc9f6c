"""The real mpi4py (the site's MPI), found past coc's own import hook.

:mod:`coc.mpi4py.hook` can make ``import mpi4py`` in a rank give coc's compatibility layer,
or stop with a guard; coc's communicator still needs the real mpi4py when the site's MPI
carries messages (``COC_SITE_MPI=1``). This leaf finds it with the hook set aside. It
imports no other part of coc, so the communicator's engine port and the hook both use it
without tying ``coc.comm`` and ``coc.mpi4py`` into an import cycle.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["Hook", "shadowed", "installed", "available", "mpi"]

_real: dict[str, ModuleType] = {}


class Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Base of coc's import hook for ``mpi4py``: the lookup needs its ``mode`` only.

    ``mode`` "coc" gives coc's modules for ``mpi4py`` (the program's must be kept apart
    from the real ones); any other mode gives none.
    """

    mode: str | None = None


def shadowed(name: str) -> bool:
    """Return True for the module names coc's hook answers (``mpi4py`` and its submodules)."""
    return name == "mpi4py" or name.startswith("mpi4py.")


def installed() -> Hook | None:
    """Return the installed hook, or None."""
    return next((f for f in sys.meta_path if isinstance(f, Hook)), None)


def available() -> bool:
    """Return True when the real mpi4py is installed (looked up on ``sys.path`` only)."""
    return importlib.machinery.PathFinder.find_spec("mpi4py") is not None


def mpi() -> ModuleType:
    """Return the real ``mpi4py.MPI`` module, also while the hook is installed.

    Imported with the hook set aside; afterwards ``sys.modules`` again names coc's modules,
    so the program's ``mpi4py`` stays coc's.
    """
    finder = installed()
    if finder is None:
        return importlib.import_module("mpi4py.MPI")
    if finder.mode != "coc":           # the guard: no program modules to keep apart
        sys.meta_path.remove(finder)
        try:
            return importlib.import_module("mpi4py.MPI")
        finally:
            sys.meta_path.insert(0, finder)
    if "MPI" not in _real:
        program = {k: sys.modules.pop(k) for k in list(sys.modules) if shadowed(k)}
        sys.meta_path.remove(finder)
        try:
            _real["MPI"] = importlib.import_module("mpi4py.MPI")
        finally:
            _real.update({k: sys.modules.pop(k) for k in list(sys.modules) if shadowed(k)})
            sys.modules.update(program)
            sys.meta_path.insert(0, finder)
    return _real["MPI"]
