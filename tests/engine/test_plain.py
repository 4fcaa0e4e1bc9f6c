"""The binding's writer and reader of plain data (``coc/_plain.pxi``) against pickle.

What the fast path writes must be what ``pickle.loads`` reads as the same object (types
included), what it reads must be what ``pickle.loads`` builds from any pickle of plain
data, and everything else must go to pickle: ``plain_dumps`` answers None, ``plain_loads``
hands the stream to ``pickle.loads`` (same result, same error).
"""

import math
import pickle
import random
from collections import OrderedDict

import numpy as np
import pytest

from coc._engine import plain_dumps, plain_loads

INTS = [0, 1, 255, 256, 65535, 65536, -1, -255, -256, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
        2**32, 2**40 + 3, -2**40, 2**63 - 1, -2**63]
FLOATS = [0.0, -0.0, 1.5, -3.25, 1e-300, 1e300, math.inf, -math.inf, 5e-324]
STRS = ["", "a", "halo", "é∂ü", "日本語", "x" * 255, "y" * 256, "z" * 3000, "\x00\n"]
BYTES = [b"", b"\x00\xff", b"b" * 255, b"c" * 256, b"d" * 3000]
PLAIN = [None, True, False, *INTS, *FLOATS, *STRS, *BYTES,
         (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((),), [], [[]], {}, {"a": {}},
         {"step": 7, "name": "halo", "value": 3.25, "ids": [1, 2, 3, 4, 5, 6, 7, 8]},
         {1: "one", 2.5: None, (1, "t"): [b"x", True], None: (), False: -7},
         [{"k": [(1, 2.0, "3"), {"n": None}]}, "tail"]]


def same(a, b):
    """Equal, and of the same types all the way down (1 == 1.0 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a)
                                                     == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return (list(a) == list(b) and all(same(x, y) for x, y in zip(a, b))
                and all(same(a[k], b[k]) for k in a))
    return a == b


def random_plain(rng, depth=0):
    """A random plain object: scalars, and containers while ``depth`` allows."""
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice(INTS) if rng.random() < 0.5 else rng.randrange(-2**62, 2**62)
    if kind == 2:
        return rng.choice(FLOATS + [rng.uniform(-1e6, 1e6)])
    if kind == 3:
        return "".join(rng.choice("ab€\u1234") for _ in range(rng.randrange(8)))
    if kind in (4, 5):
        return bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
    items = [random_plain(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 6:
        return tuple(items)
    if kind == 7:
        return items
    return {rng.choice([rng.randrange(100), str(rng.randrange(100))]): v for v in items}


@pytest.mark.parametrize("obj", PLAIN, ids=lambda o: repr(o)[:30])
def test_written_plain_data_is_read_by_pickle_as_itself(obj):
    stream = plain_dumps(obj)
    assert stream is not None and stream[:2] == b"\x80\x05"
    assert same(pickle.loads(stream), obj)
    assert same(plain_loads(stream), obj)


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_reader_builds_what_pickle_builds_from_pickle_dumps(protocol):
    for obj in PLAIN:
        assert same(plain_loads(pickle.dumps(obj, protocol)), obj), obj


def test_random_plain_data_both_ways():
    rng = random.Random(17)
    for _ in range(2000):
        obj = random_plain(rng)
        stream = plain_dumps(obj)
        assert stream is not None
        assert same(pickle.loads(stream), obj)
        assert same(plain_loads(stream), obj)
        assert same(plain_loads(pickle.dumps(obj, 5)), obj)


def test_nan_travels():
    assert math.isnan(plain_loads(plain_dumps(math.nan)))


def test_shared_containers_read_from_pickle_stay_shared():
    inner = [1, 2]
    got = plain_loads(pickle.dumps({"a": inner, "b": inner, "c": (inner, inner)}, 5))
    assert got["a"] is got["b"] is got["c"][0] is got["c"][1]
    got["a"].append(3)
    assert got["b"] == [1, 2, 3]


class Sub(dict):
    pass


def _recursive():
    x = []
    x.append(x)
    return x


def _nested(n):
    obj = []
    for _ in range(n):
        obj = [obj]
    return obj


shared = [1]
NOT_PLAIN = {
    "ndarray": np.zeros(3), "numpy scalar": np.float64(1.0), "dict subclass": Sub(a=1),
    "OrderedDict": OrderedDict(a=1), "set": {1, 2}, "bytearray": bytearray(b"x"),
    "object": object(), "class": int, "complex": 1j, "int beyond 64 bits": 2**64,
    "negative int beyond 64 bits": -2**63 - 1, "lone surrogate": "\udc80",
    "shared list": [shared, shared], "recursive list": _recursive(),
    "too long": "x" * 5000, "too long bytes": [b"y" * 3000, b"z" * 3000],
    "too many containers": _nested(70), "inside a dict": {"data": np.zeros(2)},
}


@pytest.mark.parametrize("name", NOT_PLAIN)
def test_anything_else_goes_to_pickle(name):
    obj = NOT_PLAIN[name]
    assert plain_dumps(obj) is None
    stream = pickle.dumps(obj, 5)
    got = plain_loads(stream)       # read by pickle.loads (a class, a set, ...) or itself
    want = pickle.loads(stream)
    if name == "ndarray" or name == "inside a dict":
        np.testing.assert_equal(got, want)
    elif name == "recursive list":
        assert got[0] is got
    elif name != "object":
        assert got == want and type(got) is type(want)


@pytest.mark.parametrize("stream", [
    b"", b"\x80", b"\x80\x05", b"\x80\x05}(", b"\x80\x05}(K\x01", b"\x80\x05\x8c\x05ab",
    b"\x80\x05X\xff\xff\xff\xffab.", b"\x80\x05K", b"\x80\x05G\x00", b"\x80\x05\x8a\x09" + b"\x00" * 9 + b".",
    b"\x80\x05}(]K\x01u.",             # an unhashable key
    b"\x80\x05h\x00.",                  # a memo entry that is not there
    b"\x80\x05u.", b"\x80\x05e.", b"\x80\x05t.", b"\x80\x05K\x01K\x02u.",
    b"\x80\x06N.",                      # a protocol pickle does not know
    b"\x80\x05\x8c\x02\xff\xfe.",       # not UTF-8
    b"\x80\x05\x93.",                   # an opcode the reader does not read (STACK_GLOBAL)
], ids=repr)
def test_bad_streams_raise_what_pickle_raises(stream):
    try:
        want = pickle.loads(stream)
    except Exception as exc:  # noqa: BLE001 - whatever pickle raises, plain_loads must too
        with pytest.raises(type(exc)) as got:
            plain_loads(stream)
        assert str(got.value) == str(exc)
    else:
        assert same(plain_loads(stream), want)


def test_reader_reads_past_nothing_after_stop():
    assert plain_loads(b"\x80\x05K\x07.garbage") == pickle.loads(b"\x80\x05K\x07.garbage") == 7


def test_long1_of_any_length_up_to_eight_bytes():
    for value in (0x7f, 0x80, -0x80, -0x81, 2**40, -2**40, 2**55 - 1, -2**55):
        stream = pickle.dumps(value, 5)
        assert plain_loads(stream) == value == pickle.loads(stream)


def test_many_short_strings_each_read_as_itself():
    """The reader keeps short ASCII strings by a hash of their bytes: strings that share a
    slot, and strings longer or not ASCII, still arrive as themselves."""
    words = [f"k{i}" for i in range(1000)] + ["", "x" * 24, "y" * 25, "é", "a\x00b"]
    for chunk in range(0, len(words), 100):
        some = words[chunk:chunk + 100]
        assert plain_loads(plain_dumps(some)) == some
    assert plain_loads(pickle.dumps(words[::-1], 5)) == words[::-1]
