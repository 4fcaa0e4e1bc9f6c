"""The record layer on marked links (docs/wire-protocol.md "Record layer"): encrypted and
compressed connections between real engines, through gateway daemons, and what they refuse.

A relay between two engines (a thread with real sockets) records the bytes that cross the
link, so a test sees what an observer of the wire would see, and can alter them.
"""

import socket
import threading
import time

import numpy as np
import pytest

from coc import errors
from coc.bench.engine import tcp_only as _tcp
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
EAGER = 64 << 10
SIZES = [0, 1, 100, 4095, EAGER, EAGER + 1, 200_000, 3 << 20]
HANDSHAKE = 48 + 32  # a hello and a proof precede the records in each direction
MARKER = b"coc-plaintext-marker-7f3a"  # must never cross an encrypted link readably
LAYERS = [(True, "none"), (True, "zstd"), (False, "lz4"), (True, "lz4"), (False, "zstd")]


def _data(size, compressible, seed):
    if compressible:   # a marker every 100 bytes in a repeating text
        text = (MARKER + b" %08d " % seed + b"x" * 66) * (size // 100 + 1)
        return np.frombuffer(text[:size], dtype=np.uint8).copy()
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def _exchange(a, a_id, b, b_id, sizes, compressible=True):
    """Send every size both ways and check every byte."""
    for i, size in enumerate(sizes):
        for src, dst, src_id, dst_id in ((a, b, a_id, b_id), (b, a, b_id, a_id)):
            data = _data(size, compressible, i)
            out = np.zeros(size, dtype=np.uint8)
            r = dst.irecv(out, src_id, tag=i)
            src.isend(data, dst_id, tag=i).wait(TIMEOUT)
            assert r.wait(TIMEOUT).count == size
            assert (out == data).all(), f"{size} bytes from {src_id} to {dst_id} arrived changed"


def _settled(read, ok):
    """Return ``read()`` once ``ok(*read())`` holds; fail after TIMEOUT with the last values."""
    deadline = time.monotonic() + TIMEOUT
    while not ok(*(got := read())):
        assert time.monotonic() < deadline, f"never settled: {got}"
        time.sleep(0.01)
    return got


def _logged(eng, text):
    """Return the first line of ``eng``'s log holding ``text``; fail after TIMEOUT."""
    deadline, lines = time.monotonic() + TIMEOUT, []
    while not any(text in line for line in lines):
        assert time.monotonic() < deadline, f"nothing logged with {text!r}: {lines}"
        lines += eng.take_log()
        time.sleep(0.01)
    return next(line for line in lines if text in line)


def _unix(address):
    """The unix:@ entry of an engine address (the same-host path engines prefer)."""
    return next(a for a in address.split() if a.startswith("unix:@"))


class Relay:
    """A relay in front of engine address ``target`` (``tcp://host:port``, or ``unix:@name``
    on this host): records what passes each way and can flip one byte of the connector's
    stream at ``flip_at``."""

    def __init__(self, target, flip_at=None):
        self.target, self.flip_at = target, flip_at
        self.up, self.down = bytearray(), bytearray()   # connector -> acceptor, and back
        self.sockets = []
        if target.startswith("unix:@"):
            # engines dial unix names that carry their host's prefix: the relay's shares it
            name = target[6:].rsplit("/", 1)[0] + "/relay-%d" % id(self)
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind("\0" + name)
            self.listener.listen()
            self.address = "unix:@" + name
        else:
            self.listener = socket.create_server(("127.0.0.1", 0))
            self.address = "tcp://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.listener.settimeout(TIMEOUT)
        self.threads = [threading.Thread(target=self._serve, daemon=True)]
        self.threads[0].start()

    def _connect_target(self):
        if self.target.startswith("unix:@"):
            far = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            far.settimeout(TIMEOUT)
            far.connect("\0" + self.target[6:])
            return far
        host, port = self.target[6:].rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=TIMEOUT)

    def _serve(self):
        try:
            near, _ = self.listener.accept()
        except OSError:
            return
        far = self._connect_target()
        self.sockets += [near, far]
        for src, dst, log, flip in ((near, far, self.up, self.flip_at),
                                    (far, near, self.down, None)):
            t = threading.Thread(target=self._pump, args=(src, dst, log, flip), daemon=True)
            t.start()
            self.threads.append(t)

    @staticmethod
    def _pump(src, dst, log, flip):
        src.settimeout(TIMEOUT)
        try:
            while chunk := src.recv(1 << 16):
                chunk = bytearray(chunk)
                if flip is not None and len(log) <= flip < len(log) + len(chunk):
                    chunk[flip - len(log)] ^= 0x20
                log += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()
        for s in self.sockets:   # ends the pumps' reads
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(TIMEOUT)
        for s in self.sockets:
            s.close()


@pytest.fixture
def relay():
    made = []

    def make(engine_, flip_at=None, via=_tcp):
        made.append(Relay(via(engine_.address), flip_at))
        return made[-1]
    yield make
    for r in made:
        r.close()


def _pair(open_engine, relay, encrypt, compress, mark_acceptor=True, flip_at=None, via=_tcp,
          shm=None):
    a = open_engine(1, eager_limit=EAGER, shm=shm)
    b = open_engine(2, eager_limit=EAGER)
    link = relay(b, flip_at, via)
    a.add_peer(2, link.address)
    b.add_peer(1, via(a.address))
    a.set_route(2, [2])
    b.set_route(1, [1])
    a.set_peer_wire(2, encrypt=encrypt, compress=compress)
    if mark_acceptor:
        b.set_peer_wire(1, encrypt=encrypt, compress=compress)
    return a, b, link


@pytest.mark.parametrize("via", [_tcp, _unix], ids=["tcp", "unix"])
@pytest.mark.parametrize("encrypt,compress", LAYERS)
def test_marked_link_delivers_every_size_both_ways(open_engine, relay, encrypt, compress, via):
    # over a unix socket too (the one-host default's gateways): the marking is the network's,
    # whatever carries it; and no shared memory is offered (the relay could not pass it)
    a, b, link = _pair(open_engine, relay, encrypt, compress, via=via)
    _exchange(a, 1, b, 2, SIZES, compressible=True)
    _exchange(a, 1, b, 2, [EAGER + 1, 3 << 20], compressible=False)
    assert any("record layer, %s" % ("encrypted" if encrypt else "not encrypted") in line
               for line in a.take_log())
    # every record a sent is the bytes on the wire after its hello and proof, and b took
    # them all (credit returns may still be on their way: wait for them to settle)
    sa, sb = _settled(lambda: (a.stats(), b.stats()), lambda sa, sb: (
        sa["record_wire_sent"] == sb["record_wire_received"] == len(link.up) - HANDSHAKE
        and sb["record_wire_sent"] == sa["record_wire_received"] == len(link.down) - HANDSHAKE))
    assert sa["record_plain_sent"] == sb["record_plain_received"] > sum(SIZES)
    if encrypt:
        assert MARKER not in link.up and MARKER not in link.down
    if compress != "none":   # the text shrinks; the random data went raw after a try
        assert sa["record_wire_sent"] < 0.75 * sa["record_plain_sent"]
        assert sa["records_raw"] > 0
    else:
        assert MARKER not in link.up and sa["records_raw"] == 0


@pytest.mark.parametrize("via", [_tcp, _unix], ids=["tcp", "unix"])
def test_unmarked_link_carries_plaintext(open_engine, relay, via):
    # the other half of the check above: without the layer the marker is on the wire (the
    # unix relay cannot pass a shared-memory segment: the socket alone carries the frames)
    a = open_engine(1, eager_limit=EAGER, shm=False)
    b = open_engine(2, eager_limit=EAGER)
    link = relay(b, via=via)
    a.add_peer(2, link.address)
    a.set_route(2, [2])
    b.set_route(1, [1])
    _exchange(a, 1, b, 2, [1000])
    assert MARKER in link.up and MARKER in link.down
    assert a.stats()["record_wire_sent"] == 0


def test_altered_record_is_a_protocol_error_naming_the_peer(open_engine, relay):
    # byte 200 of the connector's stream lies past its hello and proof (80 bytes): in a record
    a, b, link = _pair(open_engine, relay, True, "none", flip_at=200)
    out = np.zeros(1000, dtype=np.uint8)
    r = b.irecv(out, 1, tag=1)
    a.isend(_data(1000, True, 1), 2, tag=1).wait(TIMEOUT)
    line = _logged(b, "broke the wire protocol")
    assert line.startswith("endpoint 1 (") and "failed authentication" in line
    assert b.stats()["protocol_errors"] == 1
    with pytest.raises(errors.PeerLost, match="endpoint 1 lost"):
        r.wait(TIMEOUT)   # the altered message is not delivered: its receive fails


@pytest.mark.parametrize("via", [_tcp, _unix], ids=["tcp", "unix"])
def test_acceptor_refuses_a_marked_peer_that_does_not_encrypt(open_engine, relay, via):
    # (a dialer on a unix socket that thinks its link raw offers shared memory: off here,
    # the relay could not pass the segment)
    a, b, link = _pair(open_engine, relay, False, "none", mark_acceptor=False, via=via,
                       shm=False)
    a.set_peer_wire(2)                       # the dialer forgot the marking ...
    b.set_peer_wire(1, encrypt=True)         # ... the acceptor knows its link is encrypted
    with pytest.raises(errors.PeerLost):
        a.isend(_data(10, True, 0), 2, tag=1).wait(TIMEOUT)
    assert _logged(b, "does not ask for encryption").startswith("endpoint 1 (")
    assert MARKER not in link.up and b.stats()["auth_failures"] == 1


def test_shared_memory_does_not_bypass_an_acceptors_marking(open_engine):
    # a same-host dialer that thinks the link raw offers shared memory with its hello; the
    # acceptor that knows the link is encrypted refuses it all the same
    a = open_engine(1, eager_limit=EAGER)
    b = open_engine(2, eager_limit=EAGER)
    a.add_peer(2, _unix(b.address))
    a.set_route(2, [2])
    b.set_peer_wire(1, encrypt=True)
    with pytest.raises(errors.PeerLost):
        a.isend(_data(10, True, 0), 2, tag=1).wait(TIMEOUT)
    assert _logged(b, "does not ask for encryption").startswith("endpoint 1 (unix")
    assert b.stats()["auth_failures"] == 1


def test_bad_record_layer_arguments(open_engine):
    a = open_engine(1)
    with pytest.raises(ValueError, match="compress must be one of"):
        a.set_peer_wire(2, compress="gzip")


@pytest.mark.parametrize("window", [None, 1 << 16], ids=["default-window", "small-window"])
def test_through_gateways_only_the_marked_link_uses_records(open_engine, spawn, gateway, window):
    # 1 -> gateway 10 -(marked: encrypted, zstd)-> gateway 11 -> 2: the ranks' links stay raw.
    # A small forwarding window makes the gateways pause reading (backpressure) while the
    # record layer still holds bytes it read: they must be parsed when reading resumes.
    me = open_engine(1, eager_limit=EAGER)
    child = spawn(2, "echo", peer=1, count=len(SIZES), engine_kwargs={"eager_limit": EAGER})
    marked = {"encrypt": True, "compress": "zstd"}
    options = {"forward_window": window} if window else {}
    g1 = gateway(10, peers={1: me.address}, routes={1: [[1, 1]]}, wire={11: marked},
                 options=options)
    g2 = gateway(11, peers={2: child.address}, routes={2: [[2, 1]]}, wire={10: marked},
                 options=options)
    g1.update(peers={11: _tcp(g2.address)}, routes={2: [[11, 1]]})
    g2.update(peers={10: _tcp(g1.address)}, routes={1: [[10, 1]]})
    me.add_peer(10, g1.address)
    me.set_route(2, [10])
    child.connect({11: g2.address}, {1: [11]})
    for i, size in enumerate(SIZES):
        data = _data(size, True, i)
        out = np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, 2, tag=i)
        me.isend(data, 2, tag=i).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size
        assert (out == data).all()
    assert child.result() == len(SIZES)
    s1, s2 = g1.stats(), g2.stats()
    assert s1["record_plain_sent"] > sum(SIZES) and s2["record_plain_received"] > sum(SIZES)
    assert s1["record_wire_sent"] < 0.5 * s1["record_plain_sent"], "zstd did not shrink text"
    assert me.stats()["record_wire_sent"] == 0, "a rank's own link must stay raw"
