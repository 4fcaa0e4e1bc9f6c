"""Fixtures for the topology tests: paths of the small topology files in tests/data."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def good():
    """Return the path of a file in tests/data/topology-good by its stem."""
    return lambda stem: DATA / "topology-good" / f"{stem}.yaml"
