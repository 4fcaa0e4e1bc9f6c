"""``python -m coc``: a rank's program runs as with ``python``, but failures end it at once."""

import subprocess
import sys

import pytest
from hang_bounds import scaled

PROGRAM = """
import atexit, os, sys, threading
atexit.register(lambda: print("exit handler ran", flush=True))
threading.Thread(target=threading.Event().wait, daemon=False).start()  # would keep us alive
mode = sys.argv[1]
print("argv", sys.argv[1:], __name__, flush=True)
if mode == "raise":
    def inner():
        raise ValueError("bad value")
    inner()
sys.exit({"exit4": 4, "message": "bad input"}.get(mode, 0))
"""


def _run(tmp_path, *args, env=None):
    (tmp_path / "prog.py").write_text(PROGRAM)
    return subprocess.run([sys.executable, "-m", "coc", *args], cwd=tmp_path, text=True,
                          capture_output=True, timeout=scaled(20), env=env)


@pytest.mark.parametrize("mode, status, stderr_has", [
    ("raise", 1, "ValueError: bad value"),
    ("exit4", 4, ""),
    ("message", 1, "bad input"),
])
def test_failures_end_the_process_at_once_with_their_status(tmp_path, mode, status, stderr_has):
    result = _run(tmp_path, "prog.py", mode,
                  env={"COC_RANK": "3", "COC_SITE": "b", "COC_HOST": "b2", "PATH": "/usr/bin"})
    assert result.returncode == status
    assert result.stdout == f"argv ['{mode}'] __main__\n"          # no exit handler ran
    assert stderr_has in result.stderr
    if mode == "raise":
        lines = result.stderr.splitlines()
        assert lines[0] == "[rank 3 (site b, host b2)] unhandled exception, aborting the job"
        assert all(line.startswith("[rank 3 (site b, host b2)] ") for line in lines)
        assert 'prog.py", line 9, in inner' in result.stderr and "runpy" not in result.stderr


def test_a_clean_exit_runs_exit_handlers_as_python_would(tmp_path):
    (tmp_path / "ok.py").write_text("import atexit, sys\n"
                                    "atexit.register(lambda: print('bye'))\nprint(sys.argv)\n")
    result = _run(tmp_path, "ok.py", "x")
    assert (result.returncode, result.stdout) == (0, "['ok.py', 'x']\nbye\n")


def test_modules_and_missing_files(tmp_path):
    result = _run(tmp_path, "-m", "json.tool", "--help")
    assert result.returncode == 0 and "usage:" in result.stdout
    result = _run(tmp_path, "nope.py")
    assert result.returncode == 2 and "can't open file 'nope.py'" in result.stderr
