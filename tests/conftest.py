"""Shared fixtures for the test suite."""

import os
import warnings

import pytest


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
