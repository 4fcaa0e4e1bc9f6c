"""Fixtures of the mpi4py compatibility tests: run programs under mpiexec and coc-run --mpi4py."""

import os
import sys

# Test modules import mpi4py_helpers by name (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

# Rank programs are run by the launchers, not collected as tests.
collect_ignore = ["programs"]
