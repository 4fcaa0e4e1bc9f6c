"""The README's first command, verbatim, as a new user runs it: from the root of a fresh clone,
after a plain (non-editable) ``pip install .`` into a fresh virtual environment.

The root of a source tree holds a ``coc/`` without the compiled engine; every process coc
starts must still import the installed package (coc.pycommand).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The command as README.md writes it (the test checks that it still does).
FIRST_COMMAND = "pip install . && coc-run -n 8 --tag-output python examples/hello.py"


@pytest.mark.slow
@pytest.mark.timeout(1800)        # a fresh build; minutes on a busy machine (scaled as well)
def test_readme_first_command_from_a_fresh_clone(tmp_path, scaled):
    assert f"\n{FIRST_COMMAND}\n" in (ROOT / "README.md").read_text()
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: nothing to clone")
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True,
                   timeout=scaled(120))
    # a fresh venv without the system's packages; pip's own cache is reused
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=scaled(120))
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {FIRST_COMMAND}"], cwd=clone,
                            env=env, capture_output=True, text=True, timeout=scaled(900))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"sum of 1\.\.8 over 2 sites: 36 \(expected 36\)", result.stdout), \
        result.stdout
    # the job ran on the installed coc, not the clone's source tree
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import coc; print(coc.__file__)"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=scaled(60))
    package = Path(installed.stdout.strip()).parent
    assert not str(package).startswith(str(clone)), installed.stdout
    # PEP 561: the package says it carries types, and the engine's stub comes with it
    assert (package / "py.typed").is_file() and (package / "_engine.pyi").is_file()
    assert (package / "mpi4py" / "startup" / "sitecustomize.py").is_file()   # the ranks' hook
