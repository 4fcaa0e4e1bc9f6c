"""The Examples in coc.bench's docstrings hold (pytest collects only tests/ by default)."""

import doctest
import importlib

import pytest

MODULES = ["backend", "clock", "patterns", "stats", "report", "runner", "plots"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"coc.bench.{name}")
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0
