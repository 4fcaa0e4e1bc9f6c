"""The restricted unpickler: bounded allocations and an allowlist users can extend."""

import collections
import fractions
import pickle

import numpy as np
import numpy.ma as ma
import pytest

from coc.comm import pickling


@pytest.fixture
def restricted():
    """Unpickle everything in restricted mode during the test; restore default afterwards."""
    pickling.set_unpickler("restricted-all", allow=())
    yield pickling
    pickling.set_unpickler("default", allow=())


# Small pickles that ask a constructor for a lot of memory (protocol 0 text, written by hand).
BOMBS = {
    "bytearray(1 GiB)": b"c__builtin__\nbytearray\n(I1073741824\ntR.",
    "bytes(1 GiB)": b"cbuiltins\nbytes\n(I1073741824\ntR.",
    "list(range(10**9))": b"cbuiltins\nlist\n(cbuiltins\nrange\n(I1000000000\ntRtR.",
    "ndarray((10**5, 10**5))": b"cnumpy\nndarray\n((I100000\nI100000\ntcnumpy\ndtype\n(Vf8\ntRtR.",
    "bytearray via INST": b"(I1073741824\ni__builtin__\nbytearray\n.",
    "bytearray via _reconstructor": (b"ccopyreg\n_reconstructor\n(c__builtin__\nbytearray\n"
                                     b"c__builtin__\nbytearray\nI1073741824\ntR."),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_small_pickle_cannot_allocate_much(restricted, name):
    stream = BOMBS[name]
    assert len(stream) < 100
    with pytest.raises(pickle.UnpicklingError, match=r"would allocate \d+ bytes, more than "
                                                     r"the message allows"):
        pickling.loads(stream)


def test_bombs_are_plain_pickle_in_default_mode():
    # The same stream in default mode really builds the object (here a small one).
    assert pickling.loads(b"c__builtin__\nbytearray\n(I1000\ntR.") == bytearray(1000)


def test_allocations_in_proportion_to_the_message_pass(restricted):
    assert pickling.loads(b"c__builtin__\nbytearray\n(I1000\ntR.") == bytearray(1000)
    value = {"x": np.arange(100_000), "m": np.zeros((3, 4)), "s": {1, 2}, "c": 1 + 2j,
             "d": collections.deque([1, 2]), "o": collections.OrderedDict(a=1),
             "f": fractions.Fraction(1, 3), "b": bytearray(b"abc"), "r": range(10**12)}
    got = pickling.loads(*pickling.dumps(value))
    assert got["x"].sum() == sum(range(100_000)) and got["r"] == range(10**12)
    assert {k: v for k, v in got.items() if k not in ("x", "m")} == {
        k: v for k, v in value.items() if k not in ("x", "m")}


def test_allowlist_takes_classes_functions_and_names(restricted):
    masked = ma.masked_array([1, 2, 3], mask=[0, 1, 0])
    error = ValueError("rank 3 gave up")
    for value in (masked, error):
        with pytest.raises(pickle.UnpicklingError, match="is not allowed .*set_unpickler"):
            pickling.loads(*pickling.dumps(value))
    pickling.set_unpickler(allow=[ma.MaskedArray, "numpy.ma.core:_mareconstruct", ValueError])
    assert pickling.unpickler_mode() == "restricted-all"
    assert pickling.allowed_globals() == {("numpy.ma", "MaskedArray"),
                                          ("numpy.ma.core", "_mareconstruct"),
                                          ("builtins", "ValueError")}
    got = pickling.loads(*pickling.dumps(masked))
    assert got.mask.tolist() == [False, True, False]
    assert repr(pickling.loads(*pickling.dumps(error))) == repr(error)
    pickling.set_unpickler(allow=())
    with pytest.raises(pickle.UnpicklingError):
        pickling.loads(*pickling.dumps(error))


def test_allowed_constructor_is_still_bounded(restricted):
    pickling.set_unpickler(allow=[ma.MaskedArray, ma.core._mareconstruct])
    stream = (b"cnumpy.ma.core\n_mareconstruct\n(cnumpy.ma\nMaskedArray\ncnumpy\nndarray\n"
              b"(I1000000000\ntS'b'\ntR.")
    with pytest.raises(pickle.UnpicklingError, match="_mareconstruct would allocate"):
        pickling.loads(stream)


def test_bad_allowlist_entries_are_named():
    with pytest.raises(ValueError, match="allow: 'nodots' is not 'module.name'"):
        pickling.set_unpickler(allow=["nodots"])
    with pytest.raises(ValueError, match="has no module and name"):
        pickling.set_unpickler(allow=[42])


def test_objects_without_a_large_buffer_pickle_once_with_every_buffer_in_the_stream():
    small = {"step": 7, "ids": [1, 2, 3], "a": np.arange(10), "b": bytearray(100),
             "strided": np.arange(4096)[::2]}            # not contiguous: in the stream too
    stream = pickling.stream(small)
    assert pickling.dumps(small) == (stream, [])
    back = pickling.loads(stream)
    assert back["ids"] == [1, 2, 3] and (back["strided"] == small["strided"]).all()


def test_an_object_with_a_large_buffer_is_refused_by_stream_and_sent_out_of_band():
    big = np.arange(pickling.INBAND_LIMIT, dtype=np.uint8)
    obj = {"small": np.arange(3), "big": big, "after": "x" * 10}
    with pytest.raises(pickling.OutOfBand):
        pickling.stream(obj)
    stream, buffers = pickling.dumps(obj)
    assert [b.nbytes for b in buffers] == [big.nbytes]
    assert np.shares_memory(np.frombuffer(buffers[0], np.uint8), big)   # no copy
    assert len(stream) < big.nbytes
    back = pickling.loads(stream, [bytearray(b) for b in buffers])
    assert (back["big"] == big).all() and back["after"] == "x" * 10
