"""What a process coc starts runs between fork and exec: tie its life to its parent's.

Used wherever coc starts a process that must not outlive its starter: the site agent's
ranks, gateway daemons and host agents (``coc.launcher``), and the rank a shepherd of a
site's ``mpiexec`` starts (:func:`coc.rendezvous.shepherd`). A neutral module, so the rank
side never imports the launcher for it.
"""

import ctypes
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1

_prctl = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this child if its parent dies (run between fork and exec)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
