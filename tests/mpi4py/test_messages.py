"""mpi4py buffer specifications become views of the caller's memory, or clear errors."""

import numpy as np
import pytest

from coc.comm.buffers import IN_PLACE
from coc.mpi4py.datatypes import Datatype, instances, of_dtype
from coc.mpi4py.messages import message, vector

T = instances()


def test_a_receive_view_writes_into_the_callers_buffer():
    buf = np.zeros(6)
    message([buf, (2, 3), T["DOUBLE"]])[:] = 7
    assert buf.tolist() == [0, 0, 0, 7, 7, 0]
    raw = bytearray(8)
    message([raw, T["BYTE"]])[:] = 1
    assert raw == bytearray(b"\x01" * 8)


def test_byte_view_of_a_double_array_and_typechars():
    assert message([np.zeros(4), T["BYTE"]]).shape == (32,)
    assert message([np.zeros(4), "i"]).dtype == np.dtype("i")
    assert message([np.zeros(4), 3, T["DOUBLE"]]).shape == (3,)
    assert message(None).size == 0 and message(IN_PLACE) is IN_PLACE


@pytest.mark.parametrize("spec, words", [
    ([np.zeros(4), 5, T["DOUBLE"]], "count 5"),
    ([np.zeros(3, "u1"), T["INT"]], "whole number"),
    ([np.zeros((4, 4))[:, 0], T["BYTE"]], "contiguous"),
    ([np.zeros(2), 1, 2, T["DOUBLE"]], "expected buf"),
])
def test_bad_specifications_say_what_is_wrong(spec, words):
    with pytest.raises(ValueError, match=words):
        message(spec)


def test_vector_forms():
    a = np.arange(6.0)
    assert vector([a, [1, 2, 3], [0, 1, 3], T["DOUBLE"]], 3)[1:] == [[1, 2, 3], [0, 1, 3]]
    assert vector([a, ([1, 2, 3], [3, 0, 1]), T["DOUBLE"]], 3)[1:] == [[1, 2, 3], [3, 0, 1]]
    assert vector([a, 2, T["DOUBLE"]], 3)[1:] == [[2, 2, 2], [0, 2, 4]]
    assert vector(a, 2)[1:] == [[3, 3], [0, 3]]
    with pytest.raises(ValueError, match="does not split evenly"):
        vector(a, 4)


def test_datatypes_know_their_sizes_names_and_codes():
    assert T["DOUBLE_INT"].Get_size() == 16          # C pads {double; int}
    assert of_dtype(np.dtype("c16")) == T["C_DOUBLE_COMPLEX"]
    assert Datatype.fromcode("i8") == T["INT64_T"] and T["CHAR"].typechar == "c"
    with pytest.raises(NotImplementedError, match="MPI.Datatype.Create_vector"):
        T["DOUBLE"].Create_vector(2, 1, 2)
    with pytest.raises(AttributeError):
        T["DOUBLE"].no_such_name
