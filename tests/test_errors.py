"""One error model: every exception class in coc.errors, engine errors with their code."""

import ast
import pathlib

import pytest

from coc import errors

ROOT = pathlib.Path(errors.__file__).parent

#: Exception classes that live outside coc/errors.py on purpose.
ELSEWHERE = {
    # mpi4py's own name, part of the compatibility layer's API (MPI.Exception), not coc's.
    ("coc/mpi4py/errors.py", "Exception"),
    # pickling's stop signal on the small-object path (a buffer too large for the stream was
    # found): raised and caught inside coc.comm, never an error a user sees.
    ("coc/comm/pickling.py", "OutOfBand"),
}


def _exception_classes():
    """Return {(file, class)} for every exception class in coc/: its bases name an error,
    an exception or a warning, or another class found so (``PeerExited(PeerLost)``)."""
    classes = [(str(path.relative_to(ROOT.parent)), node.name,
                {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases})
               for path in sorted(ROOT.rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef)]
    found, names = set(), set()
    while True:
        more = {(path, name) for path, name, bases in classes
                if bases & names or any(b.endswith(("Error", "Exception", "Warning"))
                                        for b in bases)}
        if more == found:
            return found
        found, names = more, {name for _, name in more}


def test_every_exception_class_is_in_coc_errors():
    outside = {found for found in _exception_classes() if found[0] != "coc/errors.py"}
    assert outside == ELSEWHERE


def test_every_class_in_coc_errors_is_exported():
    defined = {name for path, name in _exception_classes() if path == "coc/errors.py"}
    assert defined == set(errors.__all__)


def test_the_old_import_places_name_the_same_classes():
    from coc.comm import CollectiveMismatchError
    from coc.testbed import TestbedError
    from coc.topology.hostlist import HostlistError

    assert HostlistError is errors.HostlistError
    assert TestbedError is errors.TestbedError
    assert CollectiveMismatchError is errors.CollectiveMismatchError


@pytest.mark.parametrize("cls", [errors.HostlistError, errors.TestbedError,
                                 errors.CollectiveMismatchError, errors.ControlError])
def test_all_are_coc_errors(cls):
    assert issubclass(cls, errors.CocError)


def test_the_control_channel_has_its_own_error():
    from coc import protocol

    with pytest.raises(errors.ControlError, match="not JSON") as info:
        protocol.decode(b"{x")
    assert not isinstance(info.value, errors.EngineError)


@pytest.mark.parametrize("name, cls", [
    ("COC_EPROTO", errors.ProtocolError), ("COC_EAUTH", errors.AuthenticationError),
    ("COC_ETRUNC", errors.TruncationError), ("COC_EPEERLOST", errors.PeerLost),
    ("COC_ENOROUTE", errors.NoRouteError), ("COC_ECLOSED", errors.ClosedError),
    ("COC_ETIMEDOUT", errors.CocTimeoutError), ("COC_EINVAL", errors.EngineValueError),
    ("COC_ECANCELED", errors.CancelledError),
])
def test_engine_errors_carry_their_code(name, cls):
    """Each of coc.h's codes becomes its class, with the code, through the one builder."""
    from coc._native import engine

    code = _header_codes()[name]
    exc = engine.error(code, "context")
    assert type(exc) is cls and exc.code == code and str(exc) == "context"
    with pytest.raises(cls) as info:
        engine.raise_for(code, "while testing")
    assert info.value.code == code
    assert str(info.value) == f"while testing: {engine.strerror(code)}"


def test_the_builder_takes_context_and_a_subclass():
    from coc._native import engine

    code = _header_codes()["COC_EPEERLOST"]
    exc = engine.error(code, "gone", errors.PeerExited, peer=3, waiter=1, tag=5)
    assert type(exc) is errors.PeerExited
    assert (exc.code, exc.peer, exc.waiter, exc.tag) == (code, 3, 1, 5)
    assert isinstance(engine.error(-104, "reset"), ConnectionResetError)   # errno range


def _header_codes():
    """Return coc.h's COC_E* codes by name, read from the header (the contract itself)."""
    import re

    header = (ROOT.parent / "native" / "include" / "coc" / "coc.h").read_text()
    base = int(re.search(r"#define COC_ERR_BASE \((-?\d+)\)", header).group(1))
    return {name: base - int(n) for name, n in
            re.findall(r"(COC_E[A-Z]+) = COC_ERR_BASE - (\d+)", header)}
