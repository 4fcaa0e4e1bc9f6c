"""The C engine's source rules (docs/development.md, "Conventions") as a test: files of
one responsibility stay small, and the library reads no environment variable (its
configuration comes only through coc_engine_config; the binding reads the environment)."""

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "native" / "src"
MAX_LINES = 600

pytestmark = pytest.mark.skipif(not SRC.is_dir(), reason="needs the native/ source tree")


def _sources():
    return sorted(SRC.glob("*.[ch]"))


def test_no_source_file_over_the_limit():
    long = {p.name: n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"native/src files over {MAX_LINES} lines (split by responsibility): {long}"


def test_the_library_reads_no_environment():
    calls = [f"{p.name}:{i}" for p in _sources()
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\b(secure_)?getenv\s*\(", line)]
    assert not calls, f"getenv in native/src (use a coc_engine_config field): {calls}"
