"""``python -m coc.bench``: the ``coc bench`` command, for use as the program of a launcher.

``coc-run -n 4 python -m coc.bench run --quick`` and ``mpiexec -n 4 python -m coc.bench run``
run the same measurement as ``coc bench run``.
"""

import argparse
import importlib
import sys

from coc.bench import cli


def main(argv=None):
    """Parse ``argv`` as ``coc bench`` does and run the chosen sub-command."""
    parser = argparse.ArgumentParser(prog="python -m coc.bench",
                                     description="The sub-commands of `coc bench`.")
    subparsers = parser.add_subparsers(dest="pattern", metavar="PATTERN", required=True)
    for name in cli._PATTERN_MODULES:
        importlib.import_module(name).register(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
