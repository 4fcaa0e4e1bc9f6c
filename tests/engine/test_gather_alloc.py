"""Gather-sends, receives of unknown size and the blocking calls, between real processes.

The echo child receives into a plain buffer and sends back with ``isend``: what it
returns shows from outside that a gather arrived as ONE message with the buffers' bytes
in order, and that an ``irecv_alloc`` receive got exactly the message's size.
"""

import gc

import numpy as np
import pytest

from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
EAGER = 4096


@pytest.fixture
def pair(open_engine, spawn):
    """This process as endpoint 1, an echo child as endpoint 2 (``count`` echoes)."""
    def make(count, **kwargs):
        kwargs.setdefault("eager_limit", EAGER)
        me = open_engine(1, **kwargs)
        child = spawn(2, "echo", peer=1, count=count, engine_kwargs=kwargs)
        me.add_peer(2, child.address)
        me.set_route(2, [2])
        child.connect({1: me.address}, {1: [1]})
        return me, child
    return make


def _parts(sizes, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]


@pytest.mark.parametrize("sizes", [[5, 0, 100], [1000, 5000, 10, 300000, 1],
                                   [EAGER + 1], [0]],
                         ids=["eager", "rendezvous-spans-fragments", "one-buffer", "empty"])
@pytest.mark.parametrize("shm", [True, False], ids=["shm", "socket"])
def test_gather_is_one_message_received_at_its_exact_size(pair, sizes, shm):
    me, _ = pair(1, shm=shm, fragment_size=8192)
    parts = _parts(sizes)
    want = b"".join(p.tobytes() for p in parts)
    got = me.irecv_alloc(2, tag=9)
    me.isendv(parts, 2, tag=9).wait(TIMEOUT)
    st = got.wait(TIMEOUT)
    assert (st.source, st.tag, st.count) == (2, 9, len(want))
    msg = got.message()
    assert len(msg) == len(want) and bytes(msg) == want
    view = np.frombuffer(msg, np.uint8)
    assert view.flags.writeable


def test_message_outlives_its_request(pair):
    me, _ = pair(1)
    me.isend(np.arange(5000, dtype=np.uint8), 2, tag=1).wait(TIMEOUT)
    req = me.irecv_alloc(2, tag=1)
    req.wait(TIMEOUT)
    arr = np.frombuffer(req.message(), np.uint8)
    del req
    gc.collect()
    assert (arr == np.arange(5000, dtype=np.uint8)).all()


def test_alloc_receive_truncates_at_max(pair):
    me, _ = pair(1)
    req = me.irecv_alloc(2, tag=4, max=10)
    me.isend(np.arange(100, dtype=np.uint8), 2, tag=4).wait(TIMEOUT)
    with pytest.raises(errors.TruncationError) as info:
        req.wait(TIMEOUT)
    assert info.value.size == 100 and info.value.capacity == 10
    assert bytes(req.message()) == bytes(range(10))


def test_alloc_receive_cancels(open_engine):
    me = open_engine(1)
    req = me.irecv_alloc(2, tag=1)
    assert req.cancel()
    with pytest.raises(errors.CancelledError):
        req.wait(TIMEOUT)
    assert req.message() is None


@pytest.mark.parametrize("size", [8, EAGER * 4])
def test_blocking_send_recv(pair, size):
    me, _ = pair(2)
    data = np.arange(size, dtype=np.uint8)
    me.send(data, 2, tag=3)
    out = np.zeros(size, np.uint8)
    st = me.recv(out, 2, tag=3)
    assert (st.source, st.tag, st.count) == (2, 3, size) and (out == data).all()
    me.send(data[:5], 2, tag=4)
    st, msg = me.recv_alloc(2, tag=4)
    assert st.count == 5 and bytes(msg) == data[:5].tobytes()


def test_blocking_calls_raise_with_context(open_engine):
    me = open_engine(1)
    with pytest.raises(errors.NoRouteError, match="endpoint 7"):
        me.send(b"x", 7, tag=1)
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        me.send(np.zeros((4, 4))[:, 1], 1)
    with pytest.raises(errors.TruncationError):
        me.send(b"0123456789", 1, tag=2)         # to itself
        me.recv(bytearray(3), 1, tag=2)
    me.close()
    with pytest.raises(errors.ClosedError):
        me.recv(bytearray(3), 1)
