"""coc-run's mpi4py mode: how a program gets coc's mpi4py, and what it is refused."""

import subprocess
import sys

import pytest
from mpi4py_helpers import EXAMPLES, PROGRAMS, coc_run, mpiexec, need_mpiexec, ok

pytestmark = pytest.mark.timeout(120)


def test_without_the_mode_an_mpi4py_program_stops_saying_how_to_run_it():
    """The issue's silent failure: four one-rank worlds that exit 0. Now: exit != 0, the fix."""
    proc = coc_run(2, "python", PROGRAMS / "plain.py", mode=False)
    assert proc.returncode != 0
    assert "rank 0 of 1" not in proc.stdout
    assert "coc-run --mpi4py" in proc.stderr and "world of its own" in proc.stderr


def test_coc_mpi4py_real_asks_for_the_real_mpi4py():
    """The way out for a program that knows what the real mpi4py gives it under coc-run."""
    out = ok(coc_run(1, "python", PROGRAMS / "plain.py", mode=False,
                     options=["-x", "COC_MPI4PY=real"]))
    assert out == "rank 0 of 1\n"


def test_ranks_run_on_both_sites_and_messages_cross_them():
    out = ok(coc_run(4, "python", PROGRAMS / "where.py"))
    rows = [line.split() for line in out.splitlines()]
    sites = {int(r[1]): r[5] for r in rows}
    assert sites == {0: "a", 1: "a", 2: "b", 3: "b"}
    assert {r[3] for r in rows} == {"a1", "b1"}            # Get_processor_name: the host
    assert sum(int(r[8]) for r in rows) >= 2                # the ring crossed between sites


@need_mpiexec
def test_python_m_mpi4py_program():
    program = EXAMPLES / "ring.py"
    real = ok(mpiexec(4, sys.executable, "-m", "mpi4py", program))
    assert ok(coc_run(4, "python", "-m", "mpi4py", program)) == real


@need_mpiexec
def test_python_m_mpi4py_dash_m_module():
    real = ok(mpiexec(2, sys.executable, "-m", "mpi4py", "-m", "hello_module", cwd=PROGRAMS))
    ours = ok(coc_run(2, "python", "-m", "mpi4py", "-m", "hello_module", cwd=PROGRAMS))
    assert ours == real == "2 ranks: ['__main__:0', '__main__:1']\n"


def test_python_m_mpi4py_dash_c():
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; print(c.allreduce(c.rank))"
    out = ok(coc_run(2, "python", "-m", "mpi4py", "-c", code))
    assert out == "1\n1\n"


def test_an_exception_in_one_rank_stops_the_job():
    code = ("from mpi4py import MPI; c = MPI.COMM_WORLD\n"
            "if c.rank == 1: raise ValueError('rank 1 fails')\n"
            "c.recv(source=1)")
    proc = coc_run(2, "python", "-m", "mpi4py", "-c", code, timeout=30)
    assert proc.returncode == 1 and "rank 1 fails" in proc.stderr


def test_unsupported_names_raise_not_implemented_error_naming_them():
    code = """
from mpi4py import MPI
failures = []
for what, get in [("MPI.Win", lambda: MPI.Win), ("MPI.Comm.Create_cart",
                  lambda: MPI.COMM_WORLD.Create_cart), ("MPI.Datatype.Create_vector",
                  lambda: MPI.DOUBLE.Create_vector), ("mpi4py.futures",
                  lambda: __import__("mpi4py.futures"))]:
    try:
        get()
    except NotImplementedError as exc:
        assert what in str(exc), (what, str(exc))
    else:
        failures.append(what)
try:
    MPI.NOT_AN_MPI_NAME
except AttributeError:
    pass
print("refused:", failures == [])
"""
    assert ok(coc_run(1, "python", "-m", "mpi4py", "-c", code)) == "refused: True\n"


def test_outside_coc_run_python_m_coc_does_not_touch_mpi4py():
    """Without COC_RANK (no coc-run) the hook stays out: the real mpi4py is imported."""
    code = "import coc.mpi4py.hook as h, sys; print(h.install({}), 'coc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out == "None True\n"


@need_mpiexec
def test_site_mpi_inside_a_site_with_the_mode():
    """Ranks a site's mpiexec started talk through that MPI; the program still sees coc's."""
    out = ok(coc_run(4, "python", PROGRAMS / "where.py",
                     options=["--spawner", "a=mpiexec", "--spawner", "b=mpiexec"]))
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 4 and all(int(r[-1]) > 0 for r in rows), out


def _wrapper(tmp_path):
    """A job script as people write them: a shell that starts Python itself (not through
    ``python -m coc``), as a module system's wrapper would."""
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {PROGRAMS / 'plain.py'}\n")
    script.chmod(0o755)
    return script


def test_a_rank_started_through_a_shell_wrapper_is_stopped_without_the_mode(tmp_path):
    proc = coc_run(2, _wrapper(tmp_path), mode=False)
    assert proc.returncode != 0
    assert "rank 0 of 1" not in proc.stdout
    assert "coc-run --mpi4py" in proc.stderr


def test_a_rank_started_through_a_shell_wrapper_gets_the_mode(tmp_path):
    out = ok(coc_run(2, _wrapper(tmp_path)))
    assert sorted(out.splitlines()) == ["rank 0 of 2", "rank 1 of 2"]
