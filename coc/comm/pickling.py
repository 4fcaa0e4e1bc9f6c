"""Objects to messages and back: pickle protocol 5 with out-of-band buffers, optional restriction.

A pickled object becomes one *stream* (the pickle bytes) plus the large contiguous buffers
it holds (NumPy arrays, bytearrays, ...), which travel as separate messages straight from
and into their own memory: a large array inside an object is never copied into the stream.
Buffers smaller than :data:`INBAND_LIMIT` stay in the stream (one message beats two).

Every message reaching here came over an authenticated connection (the engine checks the
job's secret on every connection before it delivers anything). On top of that,
:func:`set_unpickler` switches on a restricted unpickler that builds only plain data:
builtin containers and scalars and NumPy arrays, never arbitrary classes or callables.
"""

import io
import os
import pickle

__all__ = ["INBAND_LIMIT", "dumps", "loads", "set_unpickler", "unpickler_mode",
           "RestrictedUnpickler"]

#: Out-of-band buffers smaller than this many bytes are kept inside the pickle stream.
INBAND_LIMIT = 4096

_MODES = ("default", "restricted", "restricted-all")
_mode = {"value": "restricted" if os.environ.get("COC_RESTRICTED_UNPICKLE") == "1"
         else "default"}

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


def set_unpickler(mode):
    """Choose how received objects are unpickled.

    Parameters
    ----------
    mode : {"default", "restricted", "restricted-all"}
        ``"default"`` is plain :mod:`pickle` (any class the program can import);
        ``"restricted"`` allows only builtin data types and NumPy arrays for objects that
        come from ranks of *other sites*; ``"restricted-all"`` applies that to every rank.
        The environment variable ``COC_RESTRICTED_UNPICKLE=1`` starts in ``"restricted"``.

    Examples
    --------
    >>> set_unpickler("restricted"); unpickler_mode()
    'restricted'
    >>> set_unpickler("default")
    """
    if mode not in _MODES:
        raise ValueError(f"unpickler mode {mode!r}: expected one of {', '.join(_MODES)}")
    _mode["value"] = mode


def unpickler_mode():
    """Return the current mode of :func:`set_unpickler`."""
    return _mode["value"]


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only builtin data types and NumPy arrays."""

    def find_class(self, module, name):
        """Return the allowed global ``module.name``; refuse everything else."""
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module in _NUMPY_MODULES and name in _NUMPY_FUNCS:
            return super().find_class(module, name)
        if module == "numpy" or module.startswith("numpy.dtypes"):
            if name == "dtype" or name.endswith("DType"):
                return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"restricted unpickler: global {module}.{name} is not allowed "
            f"(only builtin data types and NumPy arrays; see coc.comm.set_unpickler)")


def dumps(obj):
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
    """
    buffers = []

    def keep(pb):
        try:
            view = pb.raw()
        except BufferError:          # not contiguous: serialise in the stream
            return True
        if view.nbytes < INBAND_LIMIT:
            return True
        buffers.append(view)
        return False

    stream = pickle.dumps(obj, protocol=5, buffer_callback=keep)
    return stream, buffers


def loads(stream, buffers=(), *, foreign=False):
    """Return the object of ``stream`` with its out-of-band ``buffers``.

    ``foreign`` says the sender runs on another site (the restricted mode applies then).
    """
    mode = _mode["value"]
    if mode == "restricted-all" or (mode == "restricted" and foreign):
        return RestrictedUnpickler(io.BytesIO(stream), buffers=buffers).load()
    return pickle.loads(stream, buffers=buffers)
