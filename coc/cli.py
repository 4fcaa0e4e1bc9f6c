"""The ``coc`` command: one entry point whose sub-commands live beside the code they drive.

Each part that has a command line (``coc.topology.cli``, ``coc.testbed.cli``,
``coc.bench.cli``) exposes ``register(subparsers)``, which adds its sub-parser and sets
``func`` on it; ``func(args)`` returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import coc
from coc.errors import CocError

__all__ = ["main"]

# Sub-command modules, in the order ``coc --help`` lists them.
_COMMAND_MODULES = ("coc.topology.cli", "coc.testbed.cli", "coc.bench.cli", "coc.doctor.cli")


def _version(args: argparse.Namespace) -> int:
    from coc._native import engine

    print(f"coc {coc.__version__} (engine {engine.version()})")
    if args.selftest:
        engine.selftest()
        print("engine self-test: ok")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the ``coc`` argument parser with every available sub-command."""
    parser = argparse.ArgumentParser(prog="coc", description=coc.__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    v = sub.add_parser("version", help="print the version; --selftest runs the engine's self-test")
    v.add_argument("--selftest", action="store_true")
    v.set_defaults(func=_version)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not (name == exc.name or name.startswith(f"{exc.name}.")):
                raise  # the module exists but something it needs is missing
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coc`` with ``argv`` (default ``sys.argv[1:]``) and return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except CocError as exc:
        print(f"coc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `coc topo show | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
