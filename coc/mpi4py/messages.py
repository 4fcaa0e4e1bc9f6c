"""mpi4py's buffer specifications turned into the NumPy views coc's communicator moves.

Point to point and the plain collectives take ``buf``, ``[buf, type]``, ``[buf, count,
type]`` or ``[buf, (count, displ), type]`` (count and displacement in elements of the type);
the vector collectives take ``[buf, counts, displs, type]`` or ``[buf, (counts, displs),
type]`` and shorter forms. ``type`` is an ``MPI.Datatype`` (or a typechar such as ``'d'``).
A view never copies: a receive lands in the caller's memory.
"""

import numpy as np

from coc.comm.buffers import IN_PLACE
from coc.mpi4py.datatypes import Datatype

__all__ = ["message", "vector", "dtype_of"]


def dtype_of(item):
    """Return the NumPy dtype a type item stands for, or None when it is not one."""
    if isinstance(item, Datatype):
        return item._check()
    if isinstance(item, str):
        return np.dtype("S1" if item == "c" else item)
    if isinstance(item, (np.dtype, type)):
        return np.dtype(item)
    return None


def _flat(buf, dtype):
    """Return ``buf`` as a flat array of ``dtype`` sharing its memory (no copy)."""
    if isinstance(buf, np.ndarray) and buf.flags.c_contiguous:
        arr = buf.reshape(-1)
    else:
        try:
            arr = np.asarray(memoryview(buf).cast("B"))
        except TypeError as exc:
            raise ValueError(f"buffer {type(buf).__name__}: not a contiguous buffer "
                             f"({exc})") from None
    if dtype is not None and arr.dtype != dtype:
        arr = arr.view(np.uint8) if arr.dtype.itemsize != 1 else arr
        if len(arr) % dtype.itemsize:
            raise ValueError(f"buffer of {len(arr)} bytes is not a whole number of "
                             f"{dtype} elements")
        arr = arr.view(dtype)
    return arr


def message(spec):
    """Return the flat NumPy view of a point-to-point buffer specification.

    Examples
    --------
    >>> from coc.mpi4py.datatypes import instances
    >>> DOUBLE, BYTE = instances()["DOUBLE"], instances()["BYTE"]
    >>> message([np.zeros(4), BYTE]).shape, message([np.arange(6.0), (2, 3), DOUBLE])
    ((32,), array([3., 4.]))
    """
    if type(spec) is list and len(spec) == 2 and type(spec[1]) is Datatype:   # the common case
        buf = spec[0]
        if type(buf) is np.ndarray and buf.dtype is spec[1].dtype:
            return buf      # coc's calls copy a non-contiguous send, refuse such a receive
        return _flat(buf, spec[1]._check())
    if isinstance(spec, np.ndarray):
        return spec if spec.ndim == 1 and spec.flags.c_contiguous else _flat(spec, None)
    if spec is IN_PLACE:
        return spec
    if spec is None:
        return np.empty(0, np.uint8)
    if not isinstance(spec, (list, tuple)):
        return _flat(spec, None)
    if not spec or len(spec) > 3:
        raise ValueError(f"message {_describe(spec)}: expected buf, [buf, type], "
                         "[buf, count, type] or [buf, (count, displ), type]")
    buf, rest = spec[0], list(spec[1:])
    dtype = dtype_of(rest[-1]) if rest else None
    if dtype is not None:
        rest.pop()
    arr = np.empty(0, np.uint8) if buf is None else _flat(buf, dtype)
    if not rest:
        return arr
    count, displ = (rest[0], 0) if not isinstance(rest[0], (list, tuple)) else rest[0]
    count, displ = int(count), int(displ)
    if count < 0 or displ < 0 or displ + count > len(arr):
        raise ValueError(f"message count {count} at displacement {displ} does not fit "
                         f"a buffer of {len(arr)} elements")
    return arr[displ:displ + count]


def vector(spec, size):
    """Return a vector-collective specification in coc's ``[array, counts, displs]`` form.

    Examples
    --------
    >>> a, counts, displs = vector([np.arange(6.0), ([1, 2, 3], None)], 3)
    >>> counts, displs
    ([1, 2, 3], [0, 1, 3])
    """
    if spec is None or spec is IN_PLACE:
        return spec
    if not isinstance(spec, (list, tuple)):
        spec = [spec]
    buf, rest = spec[0], list(spec[1:])
    dtype = dtype_of(rest[-1]) if rest else None
    if dtype is not None:
        rest.pop()
    arr = _flat(buf, dtype)
    if len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2 \
            and not isinstance(rest[0][0], (int, np.integer)):
        rest = list(rest[0])
    counts = rest[0] if rest else None
    displs = rest[1] if len(rest) > 1 else None
    if counts is None:
        if len(arr) % size:
            raise ValueError(f"buffer of {len(arr)} elements does not split evenly over "
                             f"{size} ranks; give counts")
        counts = [len(arr) // size] * size
    elif isinstance(counts, (int, np.integer)):
        counts = [int(counts)] * size
    counts = [int(c) for c in counts]
    if displs is None:
        displs = [int(d) for d in np.concatenate(([0], np.cumsum(counts)[:-1]))]
    elif isinstance(displs, (int, np.integer)):
        displs = [int(displs) + i * counts[0] for i in range(size)]
    return [arr, counts, [int(d) for d in displs]]


def _describe(spec):
    return "[" + ", ".join(type(item).__name__ for item in spec) + "]"
