"""Collection for ``python -m pytest`` from the repository root: tests/ and the docstring
Examples in coc/ (``--doctest-modules``).

Examples that need an optional dependency (``coc[draw]``: matplotlib) are skipped with the
reason when it is missing, so the doctests run on a plain install too.
"""

import pytest

#: Module files whose Examples need an optional dependency, and its install hint.
NEEDS = {"coc/topology/draw.py": ("matplotlib", "pip install 'coc[draw]'")}


def _missing(module):
    try:
        __import__(module)
    except ImportError:
        return True
    return False


def pytest_collection_modifyitems(config, items):
    """Skip the Examples of modules whose optional dependency is not installed."""
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        path = item.path.as_posix()
        for suffix, (module, hint) in NEEDS.items():
            if path.endswith(suffix) and _missing(module):
                item.add_marker(pytest.mark.skip(reason=f"needs {module} ({hint})"))
