"""Which Python runs on a site: the site's ``python`` setting, checked before any rank starts.

A site whose Python cannot import coc, or imports another version of it, stops ``coc-run``
with one line naming the site, the host, the interpreter and the fix — not a traceback from
the middle of the job.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import coc
from launcher_helpers import COC_RUN

TIMEOUT = 60


def _python(tmp_path, name, prelude=""):
    """Return an executable that runs this Python with ``prelude`` (shell words) before it."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{prelude}exec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return path


def _run(tmp_path, python, scaled):
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"sites:\n  b:\n    python: {python}\n")
    marker = tmp_path / "ran"
    program = tmp_path / "touch.py"
    program.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = subprocess.run([*COC_RUN, "--profile", str(profile), "--site", "a=1", "--site",
                             "b=1", "python", str(program)], cwd=tmp_path, text=True,
                            capture_output=True, timeout=scaled(TIMEOUT))
    assert result.returncode != 0, result.stderr
    assert not marker.exists(), "a rank ran although a site's Python was unusable"
    return [line for line in result.stderr.splitlines() if "site b" in line]


def test_a_site_python_without_coc_stops_the_job_with_one_line(tmp_path, scaled):
    python = _python(tmp_path, "python-without-coc", prelude="")
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")   # no site-packages
    lines = _run(tmp_path, python, scaled)
    assert len(lines) == 1, lines
    assert f"Python {python} cannot import coc" in lines[0]
    assert "site b, host " in lines[0] and "'python' setting" in lines[0]


def test_a_site_python_with_another_coc_version_stops_the_job(tmp_path, scaled):
    other = tmp_path / "other"
    shutil.copytree(Path(coc.__file__).parent, other / "coc",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    init = other / "coc" / "__init__.py"
    init.write_text(init.read_text().replace(f'__version__ = "{coc.__version__}"',
                                             '__version__ = "0.0.0.other"'))
    python = _python(tmp_path, "python-other-coc", prelude=f"PYTHONPATH={other} ")
    lines = _run(tmp_path, python, scaled)
    assert len(lines) == 1, lines
    assert f"Python {python} imports coc 0.0.0.other, this coc-run is {coc.__version__}" \
        in lines[0]
