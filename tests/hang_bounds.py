"""Hang bounds for the tests: every timeout is a bound against hangs, never a speed check.

Each is multiplied by ``COC_TEST_TIMEOUT_SCALE`` (default 1), so a slow or crowded machine
needs one variable, not edits (docs/development.md, "Tests under load"). Test modules
import this by name (tests/conftest.py puts this directory on ``sys.path``).
"""

import os

#: The factor every test timeout is multiplied by.
SCALE = float(os.environ.get("COC_TEST_TIMEOUT_SCALE") or 1)


def scaled(seconds):
    """Return ``seconds`` times ``COC_TEST_TIMEOUT_SCALE``."""
    return seconds * SCALE
