"""The one way coc starts a Python process of its own: ``python -c BOOTSTRAP module args``.

``python -m coc.gateway`` puts the working directory first on ``sys.path``, so started in
the root of a source tree it imports the tree's ``coc/`` (which has no compiled engine)
instead of the installed package. Every process coc starts (site and host agents, gateway
daemons, Python ranks, bench helpers) goes through :func:`python_argv` instead: a short
bootstrap drops that entry and then runs the module exactly as ``-m`` would. It works on
every Python coc supports (``-P`` needs 3.11), and unlike ``-I`` it keeps ``PYTHONPATH`` and
the user's site-packages.

When the interpreter cannot import coc at all, the bootstrap prints one line naming the
interpreter and ends with :data:`NO_COC`, so ``coc-run`` can say which site's Python it was
and how to fix it.
"""

from __future__ import annotations

import sys

__all__ = ["BOOTSTRAP", "NO_COC", "python_argv"]

#: Exit status of a bootstrap whose Python cannot import coc.
NO_COC = 97

#: Run with ``python -c``: ``sys.argv[1]`` is the module, the rest its arguments. One line,
#: without single quotes, so that it reads well quoted in a job script or an ssh command.
BOOTSTRAP = (
    'import runpy,sys;from importlib.util import find_spec;'
    'del sys.path[:not getattr(sys.flags,"safe_path",0)];'           # the working directory
    'find_spec("coc") or sys.exit(print("coc:",sys.executable,"cannot import coc",'
    f'file=sys.stderr) or {NO_COC});'
    'runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)'
)


def python_argv(module: str, *args: str, python: str | None = None) -> list[str]:
    """Return the argv that runs ``python -m module args`` with the installed coc.

    ``python`` defaults to this interpreter.

    Examples
    --------
    >>> argv = python_argv("coc.gateway", python="/usr/bin/python3")
    >>> argv[0], argv[1], argv[3:]
    ('/usr/bin/python3', '-c', ['coc.gateway'])
    >>> python_argv("coc", "hello.py", python="py")[3:]
    ['coc', 'hello.py']
    """
    return [python or sys.executable, "-c", BOOTSTRAP, module, *args]
