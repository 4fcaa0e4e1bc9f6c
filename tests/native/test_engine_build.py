"""The compiled engine is importable, reports its version and passes its self-test."""

import pytest

import coc
from coc import errors
from coc._native import engine


def test_version_matches_package():
    assert engine.version() == coc.__version__


def test_selftest_passes():
    engine.selftest()


def test_coc_codes_become_coc_exceptions():
    with pytest.raises(errors.TruncationError, match="truncated"):
        engine.raise_for(-11003, "recv from rank 3")


def test_errno_codes_become_oserror_subclasses():
    import errno

    with pytest.raises(ConnectionRefusedError):
        engine.raise_for(-errno.ECONNREFUSED)
