"""Put coc's mpi4py hook in every Python a rank starts, however it was started.

``python -m coc`` (how coc-run starts a Python rank) installs :mod:`coc.mpi4py.hook` itself.
A rank that runs a shell wrapper, ``python -c`` or a program of its own that starts Python
would not, and its ``import mpi4py`` would give it the real mpi4py: a one-rank world and
silently wrong results. So the site agent puts this directory first on every rank's
``PYTHONPATH``; Python imports ``sitecustomize`` at start-up, this module installs the hook
and then imports the ``sitecustomize`` it shadows (a distribution's own), so nothing of the
interpreter's set-up is lost.
"""

import os as _os
import sys as _sys


def _install():
    try:
        from coc.mpi4py import hook
    except ImportError:        # an interpreter without coc: the rank will say so itself
        return
    hook.install()


def _chain():
    """Import the ``sitecustomize`` that this one shadows, if there is one."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    mine = _sys.modules.pop("sitecustomize", None)
    saved = list(_sys.path)
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  (the next one on the path)
    except ImportError:
        if mine is not None:
            _sys.modules["sitecustomize"] = mine
    finally:
        _sys.path[:] = saved


_install()
_chain()
