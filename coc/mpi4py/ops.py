"""mpi4py's reduction operations: the predefined ones and ``Op.Create`` user functions.

A user function has mpi4py's signature ``function(invec, inoutvec, datatype)``: for buffer
reductions it combines the byte buffers ``invec`` (lower ranks) into ``inoutvec`` in place,
as MPI's user functions do; for objects it is called as ``function(a, b, None)`` and returns
the result, as mpi4py does.
"""

import numpy as np

from coc.comm import ops as coc_ops
from coc.mpi4py._known import refusing
from coc.mpi4py.datatypes import of_dtype

__all__ = ["Op", "PREDEFINED"]


@refusing("Op")
class Op(coc_ops.Op):
    """A reduction operation (mpi4py's ``Op``); coc's collectives take it as they take coc's."""

    @classmethod
    def Create(cls, function, commute=False):
        """Return a user operation ``function(invec, inoutvec, datatype)``."""
        def on_objects(a, b):
            return function(a, b, None)

        def on_arrays(a, b):
            out = np.array(b, copy=True)
            function(_bytes(a), _bytes(out), of_dtype(out.dtype))
            return out
        op = cls(on_objects, commute, array_function=on_arrays,
                 name=getattr(function, "__name__", "user op"))
        op.is_predefined = False
        return op

    is_predefined = True

    @property
    def is_commutative(self):
        """Whether the operands may be swapped."""
        return self.commute

    def Reduce_local(self, inbuf, inoutbuf):
        """Store ``inbuf op inoutbuf`` into ``inoutbuf`` (buffers or ``[buf, type]``)."""
        from coc.mpi4py.messages import message
        a, b = message(inbuf), message(inoutbuf)
        b[...] = self(a, b.copy())

    def __repr__(self):
        return f"<coc.mpi4py.MPI.Op {self.name}>"


def _bytes(arr):
    """Return the writable byte buffer of ``arr``, as mpi4py hands to user functions."""
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


def _predefined(op):
    return Op(op.function, op.commute, array_function=op.array_function, name=op.name)


#: name -> the predefined operations MPI exports.
PREDEFINED = {name: _predefined(getattr(coc_ops, name)) for name in coc_ops.__all__
              if name != "Op"}
PREDEFINED["NO_OP"] = Op(lambda a, b: a, commute=False, name="NO_OP")
