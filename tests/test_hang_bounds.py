"""The tests' own hang bounds: a child that never speaks fails the test instead of stalling it."""

import subprocess
import sys

import pytest
from hang_bounds import read_line


def test_read_line_returns_the_first_line_and_leaves_the_rest():
    proc = subprocess.Popen([sys.executable, "-c", "print('port 5'); print('more')"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(proc, 30) == "port 5\n"
        assert proc.stdout.read() == "more\n"
    finally:
        proc.kill()
        proc.wait()


def test_read_line_kills_a_silent_child_and_names_it():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            stdout=subprocess.PIPE)
    try:
        with pytest.raises(AssertionError, match="wrote no line within"):
            read_line(proc, 0.5)
        assert proc.wait(timeout=30) != 0          # killed, not left running
    finally:
        proc.kill()
        proc.wait()
