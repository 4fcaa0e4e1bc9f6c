"""Fixtures of the comm tests: run rank programs under coc-run over both sites of two-sites."""

import os
import sys

import pytest

# Test modules import comm_helpers by name (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

from comm_helpers import assert_clean, run_job  # noqa: E402

# Rank programs are run by coc-run, not collected as tests.
collect_ignore = ["programs"]


@pytest.fixture
def job():
    """Run a rank program on n ranks and assert that every check passed; return the reports."""
    def run(program, n, *args, **kwargs):
        _, reports = run_job(program, n, *args, **kwargs)
        assert_clean(reports)
        return reports
    return run
