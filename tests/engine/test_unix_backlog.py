"""A same-host peer whose unix listener's backlog is full (native/src/sock.c).

A non-blocking unix connect to such a listener is not "in progress" as on TCP: it fails
with EAGAIN and leaves the socket unconnected. The engine retries for a bounded time
(native/tests/test_sock.c shows the retry succeeding once the backlog drains); a listener
that stays full gives a timeout naming the address, not a write on an unconnected socket.
"""

import socket

import numpy as np
import pytest

from coc import errors
from hang_bounds import scaled

TIMEOUT = scaled(30.0)


@pytest.fixture
def full_listener(open_engine):
    """A unix listener with this host's engine prefix whose backlog is full; its address."""
    me = open_engine(1)
    unix = next(a for a in me.address.split() if a.startswith("unix:@"))
    name = unix[6:].rsplit("/", 1)[0] + "/full-backlog-test"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(0)                    # admits one connection nobody accepts
    pending = []
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        pending.append(s)
        try:
            s.connect("\0" + name)
        except BlockingIOError:           # full now
            break
    yield me, "unix:@" + name
    for s in pending:
        s.close()
    listener.close()


def test_a_listener_whose_backlog_stays_full_times_out_naming_its_address(full_listener):
    me, address = full_listener
    me.add_peer(2, address)
    me.set_route(2, [2])
    with pytest.raises(errors.CocTimeoutError) as raised:
        me.isend(np.zeros(10, dtype=np.uint8), 2, tag=1).wait(TIMEOUT)
    assert str(raised.value).startswith(f"send to endpoint 2 (tag 1): cannot connect to "
                                        f"endpoint 2 at {address}: its listen backlog stayed full")
    line = next(line for line in me.take_log() if "cannot connect" in line)
    assert address in line and "listen backlog stayed full" in line
    assert me.pending() == []             # nothing left waiting on the unconnected socket
