"""The ``coc bench`` command: one sub-command per benchmark pattern."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

__all__ = ["register", "add_pattern"]

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


def add_pattern(patterns: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                help: str, doc: str | None,
                func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """Add ``coc bench NAME``, which runs ``func(args)``; return its parser for the options.

    Its description is the first paragraph of ``doc`` (the pattern module's docstring)
    without reST's double backquotes.
    """
    p = patterns.add_parser(name, help=help,
                            description=(doc or "").split("\n\n")[0].replace("``", ""))
    p.set_defaults(func=func)
    return p
