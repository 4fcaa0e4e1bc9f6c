"""coc bench engine's reference programs: found in the source checkout a user runs it from."""

from pathlib import Path

import pytest

from coc.bench import engine
from coc.errors import CocError

ROOT = Path(__file__).resolve().parents[2]


def test_tools_come_from_the_checkout_in_the_working_directory(monkeypatch, tmp_path):
    """After ``pip install .`` coc lives in site-packages; the clone's root has native/."""
    monkeypatch.setattr(engine, "__file__", str(tmp_path / "site-packages/coc/bench/engine.py"))
    monkeypatch.chdir(ROOT)
    tools = engine.native_tools()
    assert tools["coc_relay"] == ROOT / "native" / "build" / "coc_relay"
    assert all(path.is_file() for path in tools.values())


def test_without_a_checkout_the_error_says_where_to_run(monkeypatch, tmp_path):
    monkeypatch.setattr(engine, "__file__", str(tmp_path / "site-packages/coc/bench/engine.py"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CocError, match="root of a source checkout"):
        engine.native_tools()
