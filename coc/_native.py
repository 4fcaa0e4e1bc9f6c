"""Import the compiled engine with a clear message when it has not been built."""

import os

try:
    from coc import _engine as engine  # noqa: F401
except ImportError as exc:
    _tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isdir(os.path.join(_tree, "native")) and os.path.isfile(
            os.path.join(_tree, "setup.py")):
        # The usual cause after `pip install .`: a script in the clone's root (or `python`
        # started there) puts that directory first on sys.path, ahead of the installed coc.
        _why = (f"Python imported coc from the source tree {_tree}, where nothing is built "
                f"(the directory of the script, or the working directory, comes first on "
                f"sys.path). Run from another directory, or build the tree in place with "
                f"`pip install -e .`.")
    else:
        _why = ("Install coc with `pip install .` (or `pip install -e '.[test]'` for "
                "development) from the source tree; that compiles native/ and the Cython "
                "binding together.")
    raise ImportError(f"coc's native engine (coc._engine) is not built. {_why} "
                      f"Underlying error: {exc}") from exc
