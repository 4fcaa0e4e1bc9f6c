"""Fixtures for launcher tests: run coc-run as a subprocess, check that no process survives."""

import os
import signal
import subprocess
import sys

import pytest

# Test modules import launcher_helpers by name (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

from hang_bounds import scaled  # noqa: E402
from launcher_helpers import COC_RUN  # noqa: E402

# The test programs are ranks, not test modules (they must not be imported for doctests).
collect_ignore = ["programs"]


@pytest.fixture
def coc_run(tmp_path):
    """Run coc-run to completion; returns a CompletedProcess with text output."""

    def run(*args, timeout=scaled(30), stdin=subprocess.DEVNULL, input=None, env=None):
        return subprocess.run([*COC_RUN, *map(str, args)], cwd=tmp_path, stdin=stdin,
                              input=input, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    return run


@pytest.fixture
def start_coc_run(tmp_path):
    """Start coc-run in the background (own session); every one started is killed at the end."""
    started = []

    def start(*args, stdin=subprocess.DEVNULL):
        proc = subprocess.Popen([*COC_RUN, *map(str, args)], cwd=tmp_path, stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=scaled(10))
