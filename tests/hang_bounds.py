"""Hang bounds for the tests: every timeout is a bound against hangs, never a speed check.

Each is multiplied by ``COC_TEST_TIMEOUT_SCALE`` (default 1), so a slow or crowded machine
needs one variable, not edits (docs/development.md, "Tests under load"). Test modules
import this by name (tests/conftest.py puts this directory on ``sys.path``).
"""

import os
import threading

#: The factor every test timeout is multiplied by.
SCALE = float(os.environ.get("COC_TEST_TIMEOUT_SCALE") or 1)


def scaled(seconds):
    """Return ``seconds`` times ``COC_TEST_TIMEOUT_SCALE``."""
    return seconds * SCALE


def read_line(proc, seconds):
    """Return the next line ``proc`` writes to its stdout pipe, waiting at most ``seconds``.

    ``readline()`` alone blocks for as long as a child that hangs before its first line keeps
    the pipe open; here the read runs on a helper thread, and a child that has said nothing
    when the (scaled) bound runs out is killed and the test fails naming it. Works with text
    and binary pipes, and leaves whatever follows the line in the pipe's buffer.
    """
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(scaled(seconds))
    if reader.is_alive():
        proc.kill()
        program = proc.args[0] if isinstance(proc.args, (list, tuple)) else proc.args
        raise AssertionError(f"{program} wrote no line within {scaled(seconds):g} s")
    return line[0]
