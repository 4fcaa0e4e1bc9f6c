"""The public API is annotated, and the package says so (``py.typed``).

The type checker itself (mypy, configured in pyproject.toml) runs over ``coc/`` in CI
(``.ci/run``); this test keeps its input honest: every function and method a user calls in
the annotated modules has annotations for each parameter and its result, so mypy checks
their callers and their bodies instead of treating them as untyped.
"""

import importlib
import inspect
import pathlib

import pytest

import coc

#: The modules whose whole public API (``__all__``) is annotated.
ANNOTATED = ["coc", "coc.errors", "coc.comm", "coc.topology", "coc.testbed",
             "coc.topology.hostlist", "coc.routes", "coc.rendezvous", "coc.gateway"]
#: The packages mypy checks strictly (pyproject.toml): every function annotated.
STRICT = ["coc", "coc.errors", "coc.comm", "coc.comm.*", "coc.topology", "coc.topology.*",
          "coc.testbed", "coc.testbed.*"]


def _callables(module):
    """Yield (qualified name, function) for the public functions and methods of ``module``."""
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj) and obj.__module__.startswith("coc"):
            yield f"{module.__name__}.{name}", obj
        elif inspect.isclass(obj) and obj.__module__.startswith("coc"):
            for attr, member in vars(obj).items():
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member) and (not attr.startswith("_")
                                                   or attr == "__init__"):
                    yield f"{module.__name__}.{name}.{attr}", member


def _unannotated(function):
    """Return what of ``function``'s signature lacks an annotation."""
    missing = [p.name for p in inspect.signature(function).parameters.values()
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if function.__name__ != "__init__" and "return" not in function.__annotations__:
        missing.append("return")
    return missing


@pytest.mark.parametrize("module_name", ANNOTATED)
def test_the_public_api_is_annotated(module_name):
    module = importlib.import_module(module_name)
    missing = {name: gaps for name, function in _callables(module)
               if (gaps := _unannotated(function))}
    assert missing == {}


def test_module_level_hooks_of_coc_are_annotated():
    assert not _unannotated(coc.__getattr__) and not _unannotated(coc.__dir__)


def test_py_typed_ships():
    """PEP 561: the marker is in the package and named in the package data."""
    root = pathlib.Path(coc.__file__).parent
    assert (root / "py.typed").is_file()
    setup = (root.parent / "setup.py").read_text()
    assert '"py.typed"' in setup


def test_mypy_checks_the_public_packages_strictly():
    """The public packages keep mypy's strict options on (a new untyped function fails CI)."""
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    root = pathlib.Path(coc.__file__).parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in config["overrides"]
              if o.get("disallow_untyped_defs") and o.get("check_untyped_defs")]
    covered = {m for o in strict for m in o["module"]}
    assert set(STRICT) <= covered
