"""mpi4py's predefined datatypes (``MPI.DOUBLE`` ...) as NumPy dtypes with MPI's names.

coc moves contiguous buffers, so a datatype here is a name, a NumPy dtype and mpi4py's
typechar; derived datatypes (``Create_vector`` ...) are not provided and say so.
"""

import numpy as np

from coc.mpi4py._known import refusing

__all__ = ["Datatype", "PREDEFINED", "of_dtype", "instances"]


@refusing("Datatype")
class Datatype:
    """A predefined MPI datatype: its NumPy dtype, size and typechar (mpi4py's ``Datatype``)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)

    # sizes and names
    def Get_size(self):
        """Return the size in bytes of one element."""
        return self._check().itemsize

    def Get_extent(self):
        """Return ``(lower bound, extent)`` in bytes: ``(0, size)`` for predefined types."""
        return 0, self._check().itemsize

    Get_true_extent = Get_extent

    @property
    def size(self):
        """Size in bytes of one element."""
        return self.Get_size()

    @property
    def extent(self):
        """Extent in bytes (the size: predefined types have no holes)."""
        return self.Get_size()

    lb, true_lb = property(lambda self: 0), property(lambda self: 0)
    ub = true_extent = true_ub = extent

    def Get_name(self):
        """Return the MPI name, e.g. ``MPI_DOUBLE``."""
        return f"MPI_{self.name}" if self.dtype is not None else "MPI_DATATYPE_NULL"

    def Set_name(self, name):
        """Rename the datatype (names only label it)."""
        self.name = name[4:] if name.startswith("MPI_") else name

    @property
    def typechar(self):
        """mpi4py's one-character type code (``'d'`` for DOUBLE, ``'c'`` for CHAR)."""
        return _TYPECHAR.get(self.name, self._check().char)

    @property
    def typestr(self):
        """The NumPy array-interface type string (``'f8'``)."""
        dtype = self._check()
        return dtype.str[1:] if dtype.names is None else dtype.str

    def tocode(self):
        """Return the type code mpi4py's ``Datatype.fromcode`` takes."""
        return self.typechar

    @classmethod
    def fromcode(cls, code):
        """Return the predefined datatype of a type code (``'d'``, ``'i4'``, ``'f8'``)."""
        try:
            return of_dtype(np.dtype("S1" if code == "c" else code))
        except (TypeError, KeyError):
            raise ValueError(f"Datatype.fromcode: no predefined datatype for {code!r}") from None

    is_predefined = is_named = property(lambda self: True)

    def Commit(self):
        """Return self (predefined datatypes are committed)."""
        return self

    def Dup(self):
        """Return a copy of the datatype."""
        return Datatype(self.name, self.dtype)

    Create_dup = Dup

    def Free(self):
        """Release a duplicate (predefined datatypes stay)."""

    def _check(self):
        if self.dtype is None:
            from coc.mpi4py.errors import ERR_TYPE, Exception
            raise Exception(ERR_TYPE, "MPI_DATATYPE_NULL has no size")
        return self.dtype

    def __eq__(self, other):
        return isinstance(other, Datatype) and self.dtype == other.dtype and \
            self.typechar == other.typechar

    def __hash__(self):
        return hash((self.dtype, self.name))

    def __repr__(self):
        return f"<coc.mpi4py.MPI.Datatype {self.Get_name()}>"


def _pair(value):
    """The C struct ``{value; int}`` of MPI's MINLOC/MAXLOC pair types, padded as C pads it."""
    return np.dtype([("value", value), ("index", "i4")], align=True)


#: mpi4py typechars that differ from the dtype's own character.
_TYPECHAR = {"CHAR": "c", "DOUBLE_INT": "V", "FLOAT_INT": "V", "LONG_INT": "V",
             "SHORT_INT": "V", "TWOINT": "V", "INT_INT": "V", "LONG_DOUBLE_INT": "V"}

#: name -> NumPy dtype of every predefined datatype coc provides.
PREDEFINED = {
    "BYTE": "B", "CHAR": "S1", "SIGNED_CHAR": "b", "UNSIGNED_CHAR": "B", "WCHAR": "U1",
    "SHORT": "h", "UNSIGNED_SHORT": "H", "INT": "i", "UNSIGNED": "I", "LONG": "l",
    "UNSIGNED_LONG": "L", "LONG_LONG": "q", "UNSIGNED_LONG_LONG": "Q", "FLOAT": "f",
    "DOUBLE": "d", "LONG_DOUBLE": "g", "C_BOOL": "?", "BOOL": "?", "CXX_BOOL": "?",
    "INT8_T": "i1", "INT16_T": "i2", "INT32_T": "i4", "INT64_T": "i8", "UINT8_T": "u1",
    "UINT16_T": "u2", "UINT32_T": "u4", "UINT64_T": "u8", "FLOAT16_T": "f2",
    "FLOAT32_T": "f4", "FLOAT64_T": "f8", "C_COMPLEX": "F", "C_FLOAT_COMPLEX": "F",
    "C_DOUBLE_COMPLEX": "D", "C_LONG_DOUBLE_COMPLEX": "G", "CXX_FLOAT_COMPLEX": "F",
    "CXX_DOUBLE_COMPLEX": "D", "CXX_LONG_DOUBLE_COMPLEX": "G", "AINT": "p", "OFFSET": "q",
    "COUNT": "q", "SIGNED_SHORT": "h", "SIGNED_INT": "i", "SIGNED_LONG": "l",
    "SIGNED_LONG_LONG": "q", "UNSIGNED_INT": "I",
    "FLOAT_INT": _pair("f4"), "DOUBLE_INT": _pair("f8"), "LONG_INT": _pair("l"),
    "SHORT_INT": _pair("h"), "TWOINT": _pair("i4"), "INT_INT": _pair("i4"),
    "LONG_DOUBLE_INT": _pair("g"),
}

_INSTANCES = {name: Datatype(name, dtype) for name, dtype in PREDEFINED.items()}
#: dtype -> the datatype a buffer of that dtype travels as (first name wins).
_BY_DTYPE: dict[object, Datatype] = {}
for _d in _INSTANCES.values():
    _BY_DTYPE.setdefault(_d.dtype, _d)


def of_dtype(dtype):
    """Return the predefined :class:`Datatype` of NumPy ``dtype`` (a BYTE view if none).

    Examples
    --------
    >>> of_dtype(np.dtype("f8")).Get_name(), of_dtype(np.dtype("i1")).typechar
    ('MPI_DOUBLE', 'b')
    """
    found = _BY_DTYPE.get(np.dtype(dtype))
    return found if found is not None else _INSTANCES["BYTE"]


def instances():
    """Return ``{name: Datatype}`` of every predefined datatype (``MPI`` exports them)."""
    return dict(_INSTANCES, DATATYPE_NULL=Datatype("DATATYPE_NULL", None))
