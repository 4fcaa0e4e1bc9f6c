"""The engine knobs users set through the environment still work, though the C library
reads no environment: the binding fills the engine's config from them (docs/engine.md).

The shared-memory knobs are seen from the outside in the engines' own log lines, which
name the ring size of a same-host connection, or are absent when it stays on its socket.
"""

import numpy as np
import pytest

from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)


def _exchange_logs(open_engine, **kwargs):
    """Two same-host engines in this process send each other one message; their log lines."""
    a = open_engine(1, listen_host=None, **kwargs)
    b = open_engine(2, listen_host=None, **kwargs)
    a.add_peer(2, b.address)
    b.add_peer(1, a.address)
    a.set_route(2, [2])
    b.set_route(1, [1])
    out = np.zeros(16, np.uint8)
    r = b.irecv(out, 1, tag=3)
    a.isend(np.arange(16, dtype=np.uint8), 2, tag=3).wait(TIMEOUT)
    r.wait(TIMEOUT)
    assert list(out) == list(range(16))
    return a.take_log() + b.take_log()


def test_coc_shm_ring_sets_the_ring_size(open_engine, monkeypatch):
    monkeypatch.delenv("COC_SHM", raising=False)
    monkeypatch.setenv("COC_SHM_RING", "65536")
    lines = _exchange_logs(open_engine)
    assert any("shared memory, 64 KiB rings" in line for line in lines), lines


def test_coc_shm_0_overrides_the_shm_argument(open_engine, monkeypatch):
    monkeypatch.setenv("COC_SHM", "0")
    lines = _exchange_logs(open_engine, shm=True)
    assert not any("shared memory" in line for line in lines), lines


@pytest.mark.parametrize("name, value", [("COC_SHM_RING", "3000"), ("COC_SHM_RING", "big"),
                                         ("COC_LIVENESS_MS", "soon"), ("COC_SPIN_NS", "1.5"),
                                         ("COC_SEND_HOLD_NS", "soon")])
def test_a_bad_knob_is_refused_by_name(open_engine, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(errors.EngineValueError, match=name):
        open_engine(1)
