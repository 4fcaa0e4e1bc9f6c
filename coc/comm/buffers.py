"""Buffer arguments of the uppercase methods: NumPy arrays, bytes-likes and mpi4py-style lists.

A buffer argument is a NumPy array, ``bytes``/``bytearray``/``memoryview``, or a list as
mpi4py takes them: ``[buf, dtype]``, ``[buf, count, dtype]``; the vector collectives also take
``[buf, counts]``, ``[buf, counts, displs]``, ``[buf, (counts, displs)]``, each optionally
followed by a dtype. Counts and displacements are in elements of the dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["IN_PLACE", "as_array", "as_vector", "contiguous"]


class _InPlace:
    """Marker: the receive buffer also holds this rank's input (``MPI.IN_PLACE``)."""

    def __repr__(self) -> str:
        return "coc.IN_PLACE"


IN_PLACE = _InPlace()


def _dtype_of(item: object) -> np.dtype[Any] | None:
    """Return item as a NumPy dtype, or None when it is not one."""
    if isinstance(item, (np.dtype, type, str)):
        return np.dtype(item)
    return None


def as_array(spec: Any) -> npt.NDArray[Any]:
    """Return the 1-D NumPy view (no copy) of a buffer argument.

    Examples
    --------
    >>> as_array(bytearray(4)).dtype, as_array([bytearray(16), 2, "f8"]).shape
    (dtype('uint8'), (2,))
    """
    if isinstance(spec, np.ndarray):
        return spec
    if isinstance(spec, (list, tuple)):
        arr = as_array(spec[0])
        for item in spec[1:]:
            dtype = _dtype_of(item)
            if dtype is not None:
                arr = arr.reshape(-1).view(dtype)
        counts = [item for item in spec[1:] if isinstance(item, (int, np.integer))]
        return arr.reshape(-1)[:counts[0]] if counts else arr
    return np.asarray(memoryview(spec))


def contiguous(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Return ``arr`` itself when C-contiguous, else a contiguous copy (for sending)."""
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def as_vector(spec: Any, size: int) -> tuple[npt.NDArray[Any], list[int], list[int]]:
    """Return ``(flat array, counts, displacements)`` of a vector-collective buffer argument.

    Without counts the buffer is split evenly over ``size`` ranks; without displacements
    the pieces follow each other.

    Examples
    --------
    >>> a, counts, displs = as_vector([np.arange(6.0), [1, 2, 3]], 3)
    >>> counts, displs
    ([1, 2, 3], [0, 1, 3])
    """
    if not isinstance(spec, (list, tuple)):
        arr = as_array(spec).reshape(-1)
        counts, displs = None, None
    else:
        arr = as_array(spec[0]).reshape(-1)
        rest = list(spec[1:])
        dtype = _dtype_of(rest[-1]) if rest else None
        if dtype is not None:
            rest.pop()
            arr = arr.view(dtype)
        counts = rest[0] if rest else None
        displs = rest[1] if len(rest) > 1 else None
        if isinstance(counts, tuple) and len(counts) == 2 and displs is None \
                and not isinstance(counts[0], (int, np.integer)):
            counts, displs = counts
    if counts is None:
        if len(arr) % size:
            raise ValueError(f"buffer of {len(arr)} elements does not split evenly over "
                             f"{size} ranks; give counts")
        counts = [len(arr) // size] * size
    counts = [int(c) for c in counts]
    if len(counts) != size:
        raise ValueError(f"{len(counts)} counts for a communicator of {size} ranks")
    if displs is None:
        displs = [int(d) for d in np.concatenate(([0], np.cumsum(counts)[:-1]))]
    return arr, counts, [int(d) for d in displs]
