"""Build and run the C unit tests in native/ (plain and sanitized) so CI sees them."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hang_bounds import scaled

NATIVE = Path(__file__).resolve().parents[2] / "native"

pytestmark = pytest.mark.skipif(shutil.which("make") is None or not NATIVE.is_dir(),
                                reason="needs make and the native/ source tree")


def _make(target, build):
    env = dict(os.environ, BUILD=build)
    return subprocess.run(["make", "-C", str(NATIVE), f"BUILD={build}", target],
                          capture_output=True, text=True, env=env, timeout=scaled(600))


# Building and running every test binary (sanitized: several times slower) took 74 s on a
# loaded machine, most of pytest's default 120 s limit: this one is bounded by make's own.
@pytest.mark.timeout(660)
@pytest.mark.parametrize("target,build", [("test", "build"), ("sanitize", "build-san")])
def test_native_unit_tests(target, build):
    result = _make(target, build)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert ": ok" in result.stdout
