"""Single-process checks of the pieces under the communicator: buffers, ops, pickling."""

import doctest
import importlib

import numpy as np
import pytest

from coc.comm import buffers, ops, pickling


@pytest.mark.parametrize("module", ["coc.comm.buffers", "coc.comm.ops", "coc.comm.pickling",
                                    "coc.comm.collectives.base", "coc.comm.world"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_buffer_arguments():
    assert buffers.as_array(b"abcd").dtype == np.uint8
    arr = buffers.as_array([bytearray(32), 3, "f8"])
    assert arr.shape == (3,) and arr.flags.writeable
    a, counts, displs = buffers.as_vector([np.zeros(10), ([4, 6], [6, 0])], 2)
    assert counts == [4, 6] and displs == [6, 0]
    with pytest.raises(ValueError, match="does not split evenly"):
        buffers.as_vector(np.zeros(7), 2)
    with pytest.raises(ValueError, match="3 counts for a communicator of 2"):
        buffers.as_vector([np.zeros(6), [1, 2, 3]], 2)


def test_ops_combine_in_place():
    acc, other = np.array([1.0, 5.0]), np.array([3.0, 2.0])
    assert ops.MAX.combine_into(acc, other) is acc and list(acc) == [3.0, 5.0]
    concat = ops.Op(lambda a, b: np.concatenate([a[:1], b[:1]]), commute=False)
    assert list(concat.combine_into(np.array([1, 2]), np.array([3, 4]), acc_first=False)) == [3, 1]
    pair = np.dtype([("value", "f8"), ("index", "i4")])
    a = np.array([(1.0, 0), (7.0, 0)], pair)
    b = np.array([(1.0, 1), (5.0, 1)], pair)
    assert list(ops.MINLOC(a, b)["index"]) == [0, 1] and list(ops.MAXLOC(a, b)["index"]) == [0, 0]


def test_out_of_band_buffers_are_not_copied():
    big = np.arange(100_000.0)
    stream, bufs = pickling.dumps({"big": big, "small": np.arange(10)})
    assert len(bufs) == 1 and np.shares_memory(np.asarray(bufs[0]), big)
    assert len(stream) < 1000
    got = pickling.loads(stream, bufs)
    assert np.shares_memory(got["big"], big) and list(got["small"]) == list(range(10))
