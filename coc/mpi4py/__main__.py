"""``python -m mpi4py`` under ``coc-run --mpi4py``: run a program as mpi4py's runner does.

``python -m mpi4py prog.py [args]``, ``-m module [args]``, ``-c command [args]``; also
``--rc key=value`` (recorded in ``mpi4py.rc``), ``--version`` and ``--help``. As with
mpi4py's runner, an unhandled exception in one rank aborts the whole job.
"""

import sys

from coc import __main__ as rank_main

_USAGE = ("usage: python -m mpi4py [--rc key=value,...] (program.py | -m module | -c command) "
          "[args ...]")


def _rc(text):
    from coc.mpi4py import rc
    for item in text.split(","):
        key, _, value = item.partition("=")
        rc(**{key.strip(): value.strip()})


def main(argv=None):
    """Run the program ``argv`` names (default ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c"):
        option = argv.pop(0)
        if option in ("-h", "--help"):
            print(_USAGE)
            return 0
        if option == "--version":
            from coc.mpi4py import __version__
            print(f"mpi4py {__version__} (coc compatibility mode)")
            return 0
        if option in ("--rc", "-rc") and argv:
            _rc(argv.pop(0))
        elif option.startswith("--rc="):
            _rc(option[len("--rc="):])
        else:
            print(f"python -m mpi4py: unknown option {option!r}\n{_USAGE}", file=sys.stderr)
            return 2
    if argv[:1] == ["-c"] and len(argv) > 1:
        sys.argv = ["-c", *argv[2:]]
        try:
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - one rank's failure aborts the job
            rank_main._abort(exc)
        return 0
    return rank_main.main(argv)


if __name__ == "__main__":
    sys.exit(main())
