"""``python -m coc program.py [args]`` / ``python -m coc -m module [args]``: run one rank.

The program runs through :mod:`runpy` exactly as ``python program.py`` would, with one
difference (as ``python -m mpi4py``): an unhandled exception prints its traceback tagged with
the rank and ends the process at once with status 1, and ``sys.exit(code)`` with a non-zero
code ends it at once with that code — no exit handlers run (they could wait on ranks that
never come, such as a final barrier), and other threads cannot keep it alive. ``coc-run``
sees the failure and stops the whole job, so the other ranks are not left blocked.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from coc.errors import PeerLost
from coc.mpi4py import hook

_USAGE = "usage: python -m coc (program.py | -m module) [args ...]"

#: Seconds a rank that failed only because a peer was lost waits before it exits, so that
#: coc-run hears first of the rank whose end caused it and exits with that rank's code.
CONSEQUENCE_GRACE = 1.0


def _who() -> str:
    """Return how this process is named in messages: ``rank 1 (site b, host b1)``."""
    rank = os.environ.get("COC_RANK")
    if rank is None:
        return "coc"
    return (f"rank {rank} (site {os.environ.get('COC_SITE', '?')}, "
            f"host {os.environ.get('COC_HOST', '?')})")


def _launcher_frame(filename: str) -> bool:
    return filename in (__file__, runpy.__file__) or filename.startswith("<frozen runpy")


def _exit_now(code: int) -> None:
    """Flush stdout and stderr and end the process with ``code``, skipping exit handlers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _abort(exc: BaseException) -> None:
    """Print ``exc``'s traceback tagged with the rank and end the process now with 1."""
    who = _who()
    tb = exc.__traceback__
    while tb is not None and _launcher_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next              # show the user's frames, not runpy's and ours
    lines = traceback.format_exception(type(exc), exc, tb)
    text = "".join(f"[{who}] {line}" for chunk in lines for line in chunk.splitlines(True))
    sys.stderr.write(f"[{who}] unhandled exception, aborting the job\n{text}")
    if isinstance(exc, PeerLost):
        sys.stderr.flush()
        time.sleep(CONSEQUENCE_GRACE)  # coc-run's teardown usually ends us first
    _exit_now(1)


def _exit_code(code: object) -> int:
    """Return the status ``SystemExit(code)`` stands for, printing a message code as Python does."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the program named by ``argv`` (default ``sys.argv[1:]``) as ``__main__``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv == ["-m"]:
        print(_USAGE, file=sys.stderr)
        return 2
    hook.install()           # under coc-run: `import mpi4py` gets coc's layer or a clear stop
    run: Callable[..., dict[str, Any]]
    kwargs: dict[str, Any]
    if argv[0] == "-m":
        target, sys.argv = argv[1], argv[1:]
        sys.path.insert(0, os.getcwd())          # as ``python -m module`` does
        run = runpy.run_module
        kwargs = {"run_name": "__main__", "alter_sys": True}
    else:
        target, sys.argv = argv[0], argv
        if not os.path.isfile(target):
            print(f"python -m coc: can't open file {target!r}", file=sys.stderr)
            return 2
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))   # as ``python file``
        run = runpy.run_path
        kwargs = {"run_name": "__main__"}
    try:
        run(target, **kwargs)
    except SystemExit as exc:
        code = _exit_code(exc.code)
        if code:
            _exit_now(code)
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - any other escape aborts the job
        _abort(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
