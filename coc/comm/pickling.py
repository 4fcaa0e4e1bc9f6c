"""Objects to messages and back: pickle protocol 5 with out-of-band buffers, optional restriction.

A pickled object becomes one *stream* (the pickle bytes) plus the large contiguous buffers
it holds (NumPy arrays, bytearrays, ...), which travel as separate messages straight from
and into their own memory: a large array inside an object is never copied into the stream.
Buffers smaller than :data:`INBAND_LIMIT` stay in the stream (one message beats two).

Every message reaching here came over an authenticated connection, from the endpoint it
names as its source (the engine checks each connection's pair key and each frame's source
before it delivers anything). On top of that,
:func:`set_unpickler` switches on a restricted unpickler that builds only plain data:
builtin containers and scalars and NumPy arrays, never arbitrary classes or callables, plus
the classes the user allows; what its constructors allocate is bounded by the message's size.
docs/security.md says which mode protects against what.
"""

from __future__ import annotations

import collections
import copyreg
import functools
import io
import math
import os
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypedDict

__all__ = ["PROTOCOL", "INBAND_LIMIT", "ALLOCATION_FACTOR", "ALLOCATION_SLACK", "dumps",
           "loads", "stream", "keep_inband", "OutOfBand", "dumps_out_of_band", "restricting",
           "set_unpickler", "unpickler_mode", "unpickler_state", "allowed_globals",
           "RestrictedUnpickler"]

#: The pickle protocol of every object message (5: buffers out of band).
PROTOCOL = 5
#: Out-of-band buffers smaller than this many bytes are kept inside the pickle stream.
INBAND_LIMIT = 4096
#: The restricted unpickler lets constructors it calls allocate at most this many times the
#: message's bytes, plus :data:`ALLOCATION_SLACK` (a 30-byte pickle cannot ask for 1 GiB).
ALLOCATION_FACTOR = 8
ALLOCATION_SLACK = 1 << 16

#: How received objects are unpickled (:func:`set_unpickler`).
Mode = Literal["default", "restricted", "restricted-all"]
#: Something the restricted modes may accept: a class or function, or its name.
Allowed = Any
#: A received object's buffer: anything with the buffer protocol (pickle's own typing).
_Buffer = Any

_MODES = ("default", "restricted", "restricted-all")


class _State(TypedDict, total=False):
    mode: Mode
    allow: frozenset[tuple[str, str]]
    numpy_guarded: bool          # the NumPy constructors are in _GUARDS


_state: _State = {"mode": "restricted" if os.environ.get("COC_RESTRICTED_UNPICKLE") == "1"
                  else "default", "allow": frozenset()}

_SAFE_BUILTINS = frozenset({
    "int", "float", "complex", "bool", "str", "bytes", "bytearray", "list", "tuple", "dict",
    "set", "frozenset", "slice", "range", "NoneType", "Ellipsis", "NotImplemented"})
_SAFE_GLOBALS = frozenset({
    ("collections", "OrderedDict"), ("collections", "deque"), ("_codecs", "encode"),
    ("copyreg", "_reconstructor"), ("datetime", "datetime"), ("datetime", "date"),
    ("datetime", "timedelta"), ("decimal", "Decimal"), ("fractions", "Fraction"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
})
_NUMPY_MODULES = ("numpy.core.multiarray", "numpy._core.multiarray",
                  "numpy.core.numeric", "numpy._core.numeric")
_NUMPY_FUNCS = frozenset({"_reconstruct", "_frombuffer", "scalar"})
_OLD_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _global_name(item: Allowed) -> tuple[str, str]:
    """Return ``(module, qualified name)`` of an allowlist entry: an object or its name."""
    if isinstance(item, str):
        module, sep, name = item.partition(":") if ":" in item else item.rpartition(".")
        if not (module and name):
            raise ValueError(f"allow: {item!r} is not 'module.name' or 'module:qualname'")
        return module, name
    owner, qualname = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
    if not (owner and qualname):
        raise ValueError(f"allow: {item!r} has no module and name (give a class or function)")
    return owner, qualname


def set_unpickler(mode: Mode | None = None, *, allow: Iterable[Allowed] | None = None) -> None:
    """Choose how received objects are unpickled, and which globals restricted modes accept.

    Parameters
    ----------
    mode : {"default", "restricted", "restricted-all"}, optional
        ``"default"`` is plain :mod:`pickle` (any class the program can import);
        ``"restricted"`` allows only builtin data types and NumPy arrays for objects that
        come from ranks of *other sites*; ``"restricted-all"`` applies that to every rank.
        The environment variable ``COC_RESTRICTED_UNPICKLE=1`` starts in ``"restricted"``.
        None keeps the current mode.
    allow : iterable, optional
        Classes and functions the restricted modes accept besides the built-in list: the
        objects themselves or their names (``"numpy.ma.core.MaskedArray"``, or
        ``"pkg.mod:Outer.Inner"`` for a nested class). Replaces the list of the previous
        call; ``allow=()`` empties it. Every rank that may receive such objects must call it.
        An allowed class runs its own unpickling code (``__reduce__``, ``__setstate__``):
        allow only classes whose construction from untrusted values is harmless.

    Examples
    --------
    >>> from fractions import Fraction
    >>> set_unpickler("restricted", allow=[ValueError, "numpy.ma.core.MaskedArray"])
    >>> unpickler_mode(), sorted(allowed_globals())
    ('restricted', [('builtins', 'ValueError'), ('numpy.ma.core', 'MaskedArray')])
    >>> set_unpickler("default", allow=())
    """
    if mode is not None and mode not in _MODES:
        raise ValueError(f"unpickler mode {mode!r}: expected one of {', '.join(_MODES)}")
    if allow is not None:
        _state["allow"] = frozenset(_global_name(item) for item in allow)
    if mode is not None:
        _state["mode"] = mode


def unpickler_mode() -> Mode:
    """Return the current mode of :func:`set_unpickler`."""
    return _state["mode"]


def unpickler_state() -> _State:
    """Return the live settings of :func:`set_unpickler` (a dict; ``"mode"`` is the mode).

    The binding's fast receive reads ``"mode"`` on every message instead of calling
    :func:`restricting` (no Python frame); nothing else should use it.
    """
    return _state


def allowed_globals() -> frozenset[tuple[str, str]]:
    """Return the ``(module, name)`` pairs added to the restricted allowlist by the user."""
    return _state["allow"]


def _count(value: Any) -> int:
    """Return how many items building a container from ``value`` makes, or 0 (unknown)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return len(value)
    except (TypeError, OverflowError):
        return 2**63 if isinstance(value, range) else 0   # a range too long for len()


def _items_size(value: Any = (), *_: Any) -> int:
    return 8 * _count(value)


def _bytes_size(value: Any = b"", *_: Any) -> int:
    return _count(value)


def _array_size(shape: Any = (), dtype: Any = float, *_: Any) -> int:
    import numpy

    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return math.prod(shape) * numpy.dtype(dtype).itemsize


def _reconstruct_size(subtype: Any, shape: Any = (), dtype: Any = b"b", *_: Any) -> int:
    return _array_size(shape, dtype)


def _mareconstruct_size(subtype: Any, baseclass: Any, baseshape: Any = (),
                        basetype: Any = float, *_: Any) -> int:
    return 2 * _array_size(baseshape, basetype)   # data and mask


def _reconstructor_size(cls: Any, base: Any, state: Any = None) -> int:
    guard = _GUARDS.get(base)
    return 0 if guard is None or state is None else guard(state)


#: ``{constructor: size(*args)}``: what a call of the constructor would allocate, in bytes.
_GUARDS: dict[Any, Callable[..., int]] = {
    bytes: _bytes_size, bytearray: _bytes_size, list: _items_size, tuple: _items_size,
    set: _items_size, frozenset: _items_size, dict: _items_size,
    collections.deque: _items_size, collections.OrderedDict: _items_size,
    copyreg._reconstructor: _reconstructor_size}  # type: ignore[attr-defined]  # private


def _numpy_guards() -> None:
    """Add the NumPy constructors that take a shape (NumPy is imported only when needed)."""
    import numpy

    _state["numpy_guarded"] = True
    _GUARDS[numpy.ndarray] = _array_size
    for module in _NUMPY_MODULES:
        try:
            found = __import__(module, fromlist=["_reconstruct"])
        except ImportError:
            continue
        if hasattr(found, "_reconstruct"):
            _GUARDS[found._reconstruct] = _reconstruct_size
    _GUARDS[numpy.ma.core._mareconstruct] = _mareconstruct_size  # type: ignore[attr-defined]


#: pickle's Python unpickler (typeshed types ``pickle._Unpickler`` as the C one, without the
#: ``stack``, ``dispatch`` and ``load_*`` this class extends).
_PyUnpickler: Any = pickle._Unpickler


class RestrictedUnpickler(_PyUnpickler):
    """An unpickler that builds only builtin data types, NumPy arrays and allowed globals.

    Constructors that take a size (``bytearray(n)``, ``list(range(n))``, ``ndarray(shape)``)
    may allocate at most ``allowance`` bytes in total; without it, the allowance is
    :data:`ALLOCATION_FACTOR` times the stream's length plus :data:`ALLOCATION_SLACK`.
    It is :mod:`pickle`'s Python unpickler with its four calling opcodes checked first
    (the C one has no hook there); it is slower, but only restricted modes use it and large
    arrays travel as out-of-band buffers, not in the stream.
    """

    dispatch = dict(_PyUnpickler.dispatch)

    def __init__(self, file: io.BytesIO, *, buffers: Iterable[_Buffer] | None = None,
                 allowance: int | None = None) -> None:
        super().__init__(file, buffers=buffers)
        if allowance is None:
            allowance = ALLOCATION_FACTOR * len(file.getbuffer()) + ALLOCATION_SLACK
        self.allowance = allowance

    def _charge(self, target: Any, args: Any) -> None:
        """Take what ``target(*args)`` would allocate from the allowance, or refuse it."""
        guard = _GUARDS.get(target)
        if guard is None:
            return
        try:
            nbytes = guard(*args)
        except (TypeError, ValueError, OverflowError) as exc:
            raise pickle.UnpicklingError(f"restricted unpickler: bad arguments for "
                                         f"{getattr(target, '__qualname__', target)}: "
                                         f"{exc}") from None
        if nbytes > self.allowance:
            raise pickle.UnpicklingError(
                f"restricted unpickler: {getattr(target, '__qualname__', target)} would "
                f"allocate {nbytes} bytes, more than the message allows ({self.allowance} "
                f"bytes left; the limit is {ALLOCATION_FACTOR} x its size + "
                f"{ALLOCATION_SLACK})")
        self.allowance -= nbytes

    def load_reduce(self) -> None:
        self._charge(self.stack[-2], self.stack[-1])
        super().load_reduce()
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self) -> None:
        self._charge(self.stack[-2], self.stack[-1])
        super().load_newobj()
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self) -> None:
        self._charge(self.stack[-3], self.stack[-2])
        super().load_newobj_ex()
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def _instantiate(self, klass: Any, args: Any) -> None:
        self._charge(klass, args)
        super()._instantiate(klass, args)

    def find_class(self, module: str, name: str) -> Any:
        """Return the allowed global ``module.name``; refuse everything else."""
        module = _OLD_MODULES.get(module, module)   # names in protocol 0-2 pickles
        if not self._allowed(module, name):
            raise pickle.UnpicklingError(
                f"restricted unpickler: global {module}.{name} is not allowed (only builtin "
                f"data types, NumPy arrays and what coc.comm.set_unpickler(allow=[...]) "
                f"adds)")
        if module.startswith("numpy") and "numpy_guarded" not in _state:
            _numpy_guards()
        return super().find_class(module, name)

    @staticmethod
    def _allowed(module: str, name: str) -> bool:
        if (module, name) in _state["allow"]:
            return True
        if module == "builtins":
            return name in _SAFE_BUILTINS
        if (module, name) in _SAFE_GLOBALS:
            return True
        if module in _NUMPY_MODULES:
            return name in _NUMPY_FUNCS
        return ((module == "numpy" or module.startswith("numpy.dtypes"))
                and (name == "dtype" or name.endswith("DType")))


class OutOfBand(Exception):
    """The object holds a buffer to send out of band: :func:`stream` stops, use :func:`dumps`."""


def keep_inband(pb: pickle.PickleBuffer) -> bool:
    """``buffer_callback`` of :func:`stream` (and of the binding's fast path, which calls
    ``pickle.dumps`` with it itself): keep small buffers in the stream, stop at a large one
    (most objects hold none, and then this is never called at all)."""
    try:
        view = pb.raw()
    except BufferError:              # not contiguous: serialise in the stream
        return True
    if view.nbytes < INBAND_LIMIT:
        return True
    raise OutOfBand


#: ``stream(obj)``: the pickle bytes of an object that holds no buffer of
#: :data:`INBAND_LIMIT` bytes or more; raises :class:`OutOfBand` when it holds one. The
#: small-message path: one C call, no list or closure made (a partial, not a function,
#: so no Python frame either).
stream = functools.partial(pickle.dumps, protocol=PROTOCOL, buffer_callback=keep_inband)


def dumps(obj: Any) -> tuple[bytes, list[memoryview]]:
    """Return ``(stream, buffers)``: the pickle bytes and the out-of-band buffers of ``obj``.

    ``buffers`` are C-contiguous memoryviews of ``obj``'s own memory (no copy).

    Examples
    --------
    >>> import numpy as np
    >>> stream, buffers = dumps({"x": np.zeros(10000)})
    >>> len(buffers), buffers[0].nbytes
    (1, 80000)
    >>> loads(stream, [bytearray(b) for b in buffers])["x"].shape
    (10000,)
    >>> dumps({"step": 7})[1]
    []
    """
    try:
        return stream(obj), []
    except OutOfBand:
        return dumps_out_of_band(obj)


def dumps_out_of_band(obj: Any) -> tuple[bytes, list[memoryview]]:
    """:func:`dumps` for an object :func:`stream` refused: pickle it collecting its large
    buffers (they were not copied into the dropped stream, so the first try cost little)."""
    buffers: list[memoryview] = []

    def keep(pb: pickle.PickleBuffer) -> bool:
        try:
            view = pb.raw()
        except BufferError:
            return True
        if view.nbytes < INBAND_LIMIT:
            return True
        buffers.append(view)
        return False

    return pickle.dumps(obj, protocol=PROTOCOL, buffer_callback=keep), buffers


def restricting() -> bool:
    """True when some messages are unpickled by the restricted unpickler: only then need
    a receiver work out whether a message's sender is foreign (:func:`loads`)."""
    return _state["mode"] != "default"


def loads(stream: _Buffer, buffers: Sequence[_Buffer] = (), *, foreign: bool = False) -> Any:
    """Return the object of ``stream`` with its out-of-band ``buffers``.

    ``foreign`` says the sender runs on another site (the restricted mode applies then).
    In a restricted mode the allocations the stream asks for are bounded by the message's
    size (stream and buffers) times :data:`ALLOCATION_FACTOR`.
    """
    mode = _state["mode"]
    if mode == "restricted-all" or (mode == "restricted" and foreign):
        size = len(stream) + sum(memoryview(b).nbytes for b in buffers)
        return RestrictedUnpickler(io.BytesIO(stream), buffers=buffers,
                                   allowance=ALLOCATION_FACTOR * size
                                   + ALLOCATION_SLACK).load()
    if not buffers:
        return pickle.loads(stream)  # a keyword argument costs a small message 20 %
    return pickle.loads(stream, buffers=buffers)
