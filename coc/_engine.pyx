# cython: language_level=3
"""Thin binding of coc's native engine (native/include/coc/coc.h).

Everything here is C-shaped; the friendly API is Python on top of it.
"""
cimport coc._cengine as c

from coc import errors as _errors

# coc's own codes, by the Python exception class each becomes.
_COC_CODES = {
    c.COC_EPROTO: _errors.ProtocolError,
    c.COC_EAUTH: _errors.AuthenticationError,
    c.COC_ETRUNC: _errors.TruncationError,
    c.COC_EPEERLOST: _errors.PeerLost,
    c.COC_ENOROUTE: _errors.NoRouteError,
    c.COC_ECLOSED: _errors.ClosedError,
    c.COC_ETIMEDOUT: _errors.CocTimeoutError,
    c.COC_EINVAL: _errors.EngineValueError,
    c.COC_ECANCELED: _errors.CancelledError,
}


def strerror(int rc):
    """Return the engine's text for a return code (a negative errno or a coc code)."""
    return c.coc_strerror(rc).decode()


cdef int check(int rc, str context=None) except -1:
    """Raise the exception for a negative return code; return rc otherwise.

    errno-range codes become ``OSError(-rc, msg)``, which Python narrows by itself
    (``ConnectionRefusedError`` and friends); coc codes become :mod:`coc.errors` classes.
    """
    if rc >= 0:
        return rc
    msg = c.coc_strerror(rc).decode()
    if context:
        msg = f"{context}: {msg}"
    if c.coc_is_coc_error(rc):
        raise _COC_CODES.get(rc, _errors.EngineError)(msg)
    raise OSError(-rc, msg)


def raise_for(int rc, str context=None):
    """Raise what :func:`check` raises for ``rc`` (for tests and pure-Python callers)."""
    check(rc, context)
    return rc


def version():
    """Return the native engine's version string."""
    return c.coc_version().decode()


def selftest():
    """Run the engine's built-in self-test; raise on failure."""
    cdef int rc
    with nogil:
        rc = c.coc_selftest()
    check(rc, "engine self-test")
