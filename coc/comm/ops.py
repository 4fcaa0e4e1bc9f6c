"""Reduction operations: the predefined ones of MPI and user functions (``Op.Create``).

An :class:`Op` combines two values, ``op(a, b)``. For Python objects it applies the
object function (``SUM`` is ``a + b``, ``MAXLOC`` compares ``(value, index)`` pairs); for
NumPy arrays (the buffer forms) the element-wise NumPy function. ``MINLOC``/``MAXLOC`` on
arrays take a structured dtype of two fields (value, index), like MPI's ``DOUBLE_INT``.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

#: A combining function of two contributions.
Combine = Callable[[Any, Any], Any]

__all__ = ["Op", "SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
           "MINLOC", "MAXLOC", "REPLACE"]


class Op:
    """A reduction operation: ``op(a, b)`` combines two contributions.

    Parameters
    ----------
    function : callable
        ``function(a, b)`` for Python objects (and arrays unless ``array_function``).
    commute : bool
        Whether the order of the operands does not matter; non-commutative operations
        are applied in rank order.
    array_function : callable, optional
        ``array_function(a, b)`` for NumPy arrays.
    name : str, optional

    Examples
    --------
    >>> concat = Op.Create(lambda a, b: a + b, commute=False)
    >>> concat("ab", "c"), SUM(2, 3), MAXLOC((3, 1), (3, 0))
    ('abc', 5, (3, 0))
    """

    def __init__(self, function: Combine, commute: bool = True,
                 array_function: Combine | None = None, name: str | None = None) -> None:
        self.function, self.commute = function, commute
        self.array_function = array_function or function
        self.name = name or getattr(function, "__name__", "user op")

    @classmethod
    def Create(cls, function: Combine, commute: bool = False) -> Op:
        """Return a user operation (mpi4py's ``Op.Create``)."""
        return cls(function, commute)

    def Is_commutative(self) -> bool:
        """Return True when the operands may be swapped."""
        return self.commute

    def Free(self) -> None:
        """Release the operation (nothing to release)."""

    def __call__(self, a: Any, b: Any) -> Any:
        if isinstance(a, np.ndarray):
            return self.array_function(a, b)
        return self.function(a, b)

    def combine_into(self, acc: npt.NDArray[Any], other: npt.NDArray[Any],
                     acc_first: bool = True) -> npt.NDArray[Any]:
        """Store ``op(acc, other)`` (``op(other, acc)`` if not ``acc_first``) into array ``acc``.

        NumPy ufuncs write in place: no fresh megabyte arrays (and page faults) per step.
        """
        a, b = (acc, other) if acc_first else (other, acc)
        if isinstance(self.array_function, np.ufunc):
            return self.array_function(a, b, out=acc)
        acc[...] = self.array_function(a, b)
        return acc

    def __repr__(self) -> str:
        return f"<coc.Op {self.name}>"


def _loc(better: Callable[[Any, Any], bool]) -> Combine:
    """Return the (value, index) combiner preferring ``better`` values, then lower indices."""
    def combine(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        if better(b[0], a[0]) or (b[0] == a[0] and b[1] < a[1]):
            return b
        return a
    return combine


def _array_loc(better: Callable[[Any, Any], Any]) -> Combine:
    """Return the structured-array (value, index) combiner preferring ``better`` values."""
    def combine(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
        names = a.dtype.names
        if names is None:
            raise TypeError(f"MINLOC/MAXLOC on arrays need a structured dtype of two fields "
                            f"(value, index), not {a.dtype}")
        value, index = names[:2]
        take = better(b[value], a[value]) | ((b[value] == a[value]) & (b[index] < a[index]))
        return np.where(take, b, a)
    return combine


SUM = Op(operator.add, array_function=np.add, name="SUM")
PROD = Op(operator.mul, array_function=np.multiply, name="PROD")
MIN = Op(min, array_function=np.minimum, name="MIN")
MAX = Op(max, array_function=np.maximum, name="MAX")
LAND = Op(lambda a, b: bool(a) and bool(b), array_function=np.logical_and, name="LAND")
LOR = Op(lambda a, b: bool(a) or bool(b), array_function=np.logical_or, name="LOR")
LXOR = Op(lambda a, b: bool(a) != bool(b), array_function=np.logical_xor, name="LXOR")
BAND = Op(operator.and_, array_function=np.bitwise_and, name="BAND")
BOR = Op(operator.or_, array_function=np.bitwise_or, name="BOR")
BXOR = Op(operator.xor, array_function=np.bitwise_xor, name="BXOR")
MINLOC = Op(_loc(operator.lt), array_function=_array_loc(operator.lt), name="MINLOC")
MAXLOC = Op(_loc(operator.gt), array_function=_array_loc(operator.gt), name="MAXLOC")
REPLACE = Op(lambda a, b: b, commute=False, name="REPLACE")
