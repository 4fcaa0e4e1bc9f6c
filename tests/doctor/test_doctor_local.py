"""``coc doctor`` with the embedded default (no root): the probe job runs the installed coc."""

import subprocess

from hang_bounds import scaled

from coc.pycommand import python_argv


def test_doctor_started_beside_a_source_tree_probes_with_the_installed_coc(tmp_path):
    """Run where ``coc/`` is a source tree's (as in a clone after ``pip install .``)."""
    (tmp_path / "coc").mkdir()
    (tmp_path / "coc" / "__init__.py").write_text("raise ImportError('the source tree')\n")
    done = subprocess.run([*python_argv("coc.cli"), "doctor", "two-sites",
                           "--timeout", str(scaled(100))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=scaled(150),
                          stdin=subprocess.DEVNULL)
    table = done.stdout + done.stderr
    assert done.returncode == 0, table
    assert "the source tree" not in table and "a job can run" in table, table
