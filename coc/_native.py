"""Import the compiled engine with a clear message when it has not been built."""

try:
    from coc import _engine as engine  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "coc's native engine (coc._engine) is not built. Install coc with "
        "`pip install .` (or `pip install -e '.[test]'` for development) from the "
        "source tree; that compiles native/ and the Cython binding together. "
        f"Underlying error: {exc}"
    ) from exc
