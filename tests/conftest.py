"""Shared fixtures for the test suite.

Timeouts in the tests are bounds against hangs, never performance checks; every one is
scaled by ``COC_TEST_TIMEOUT_SCALE`` (:mod:`hang_bounds`), and so is pytest-timeout's
per-test limit.
"""

import os
import sys
import warnings

import pytest

# Test modules import hang_bounds by name (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

from hang_bounds import SCALE as TIMEOUT_SCALE, scaled  # noqa: E402


@pytest.fixture(name="scaled")
def scaled_fixture():
    """The function that scales a timeout: ``scaled(30)`` is 30 s times the factor."""
    return scaled


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Scale pytest-timeout's limit (ini ``timeout`` or ``--timeout``) before it reads it."""
    if TIMEOUT_SCALE != 1:
        base = config.getoption("timeout", None) or config.getini("timeout")
        if base:
            config.option.timeout = float(base) * TIMEOUT_SCALE


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Scale explicit ``@pytest.mark.timeout(N)`` limits as well."""
    if TIMEOUT_SCALE == 1:
        return
    for item in items:
        for mark in item.iter_markers("timeout"):
            if mark.args:
                mark.args = (float(mark.args[0]) * TIMEOUT_SCALE, *mark.args[1:])


@pytest.fixture(scope="module")
def two_sites_testbed(request):
    """Build the built-in two-sites topology as network namespaces for one test module.

    Needs root (tests using it are marked ``root`` and skip otherwise). The testbed is named
    after the module and this process, so modules and parallel runs never collide, and it
    is always taken down, also when a test fails.
    """
    import coc.testbed
    from coc.errors import TopologyWarning
    from coc.topology import load

    with warnings.catch_warnings():   # two-sites' single gateways are expected
        warnings.simplefilter("ignore", TopologyWarning)
        G = load("two-sites")
    tag = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:8]
    with coc.testbed.up(G, name=f"{tag}-{os.getpid()}") as bed:
        yield bed
