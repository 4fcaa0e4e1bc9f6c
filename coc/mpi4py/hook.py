"""``import mpi4py`` in a rank of ``coc-run``: coc's compatibility layer, or a clear stop.

``python -m coc`` (how coc-run starts every Python rank) calls :func:`install`. With
``COC_MPI4PY=1`` (``coc-run --mpi4py``) an import hook makes ``mpi4py`` and ``mpi4py.MPI``
the very modules :mod:`coc.mpi4py` and :mod:`coc.mpi4py.MPI`, and ``python -m mpi4py`` run
:mod:`coc.mpi4py.__main__`. Without it, importing mpi4py stops the rank with an error that
says how to run the program: the real mpi4py, started by coc-run rather than by an MPI
launcher, would give every rank a one-rank world of its own and silently wrong results. A
program that joined the job through coc's own API first (``coc.init()``) knows where it
runs and gets the real mpi4py (for instance the site's MPI under the ``mpiexec`` spawner), as
does every rank with ``COC_MPI4PY=real``.

coc itself still reaches the real mpi4py (the site's MPI, ``COC_SITE_MPI=1``) through
:func:`coc.realmpi.mpi`, which sets this hook aside.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

from coc.errors import LaunchError
from coc.realmpi import Hook, installed, shadowed

__all__ = ["MODE_VARIABLE", "install", "installed", "rank_pythonpath"]

#: The rank environment variable that turns the compatibility mode on.
MODE_VARIABLE = "COC_MPI4PY"

GUARD = ("this program imports mpi4py, but coc-run's ranks are not one MPI job: the real "
         "mpi4py would give every rank (or every site) a world of its own. Run it as "
         "`coc-run --mpi4py ...`: coc's mpi4py compatibility mode (docs/api.md)")

_SUBMODULES = {"MPI"}


class _Finder(Hook):
    """Finds ``mpi4py`` and ``mpi4py.*`` first: coc's modules (mode "coc") or an error."""

    def __init__(self, mode):
        self.mode = mode

    def find_spec(self, name, path=None, target=None):
        if not shadowed(name):
            return None
        if self.mode != "coc":
            if _joined():
                return None              # a coc program that joined first: the real mpi4py
            raise LaunchError(f"rank {os.environ.get('COC_RANK', '?')}: {GUARD}")
        if name == "mpi4py.__main__":
            origin = importlib.util.find_spec("coc.mpi4py.__main__").origin
            return importlib.util.spec_from_file_location(name, origin)
        sub = name.partition(".")[2]
        if sub and sub not in _SUBMODULES:
            raise NotImplementedError(f"{name} is not supported by coc's mpi4py "
                                      "compatibility mode (only mpi4py.MPI; docs/api.md)")
        return importlib.machinery.ModuleSpec(name, self, is_package=not sub)

    def create_module(self, spec):
        return importlib.import_module("coc." + spec.name)   # the module itself, not a copy

    def exec_module(self, module):
        """Nothing to run: :meth:`create_module` returned an imported module."""


def _joined():
    """Return True once this process joined the job through coc's own API."""
    world = sys.modules.get("coc.comm.world")
    return world is not None and world.initialized()


def install(environ=None):
    """Under coc-run (``COC_RANK`` set), put the hook first; its mode from ``COC_MPI4PY``.

    ``COC_MPI4PY=1``: coc's layer; unset: the guard; ``real``: no hook (the program knows
    what the real mpi4py gives it under coc-run). Returns the mode, or None outside coc-run.
    """
    environ = os.environ if environ is None else environ
    if "COC_RANK" not in environ:
        return None
    if environ.get(MODE_VARIABLE) == "real":
        return "real"
    finder = installed()
    if finder is None:
        finder = _Finder("coc" if environ.get(MODE_VARIABLE) == "1" else "guard")
        sys.meta_path.insert(0, finder)
    return finder.mode


def rank_pythonpath(environ):
    """Return the ``PYTHONPATH`` a rank gets: coc's start-up directory, then ``environ``'s.

    The directory holds a ``sitecustomize`` that installs the hook in every Python the rank
    starts (a shell wrapper's, ``python -c``), not only in ``python -m coc``: without it,
    such a Python would import the real mpi4py and run as a world of one.

    Examples
    --------
    >>> rank_pythonpath({"PYTHONPATH": "/my/lib"}).endswith("startup:/my/lib")
    True
    """
    startup = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")
    rest = environ.get("PYTHONPATH")
    return startup + (os.pathsep + rest if rest else "")
