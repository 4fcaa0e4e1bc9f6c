"""The ``coc bench`` command: one sub-command per benchmark pattern."""

import importlib

__all__ = ["register"]

# Pattern modules, in the order ``coc bench --help`` lists them; each has register(patterns).
_PATTERN_MODULES = ("coc.bench.engine", "coc.bench.runner", "coc.bench.compare",
                    "coc.bench.verify", "coc.bench.reproduce")


def register(subparsers):
    """Add ``coc bench PATTERN`` with every pattern's own sub-parser."""
    bench = subparsers.add_parser(
        "bench", help="measure coc against reference implementations in the same run",
        description="Measure coc against reference implementations in the same run; "
                    "claims are ratios between paths measured together.")
    patterns = bench.add_subparsers(dest="pattern", metavar="PATTERN", required=True)
    for name in _PATTERN_MODULES:
        importlib.import_module(name).register(patterns)
