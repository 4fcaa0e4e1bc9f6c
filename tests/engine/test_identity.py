"""Endpoint identity: pairwise keys, issued key tables, source checks, duplicate ids.

An endpoint opened with the keys issued to it (no secret) can prove no id but its own; a
gateway drops a connection whose frames carry another endpoint's id as source, and refuses
a second connection for an id that is connected (docs/security.md).
"""

import hashlib
import hmac
import os
import socket
import struct
import time

import pytest

from coc import errors, keys
from coc._native import engine
from engine_peers import SECRET, cpu_seconds, gateway_log, wait_for_log
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
GW = 10


def issued(self_id, peers, gateways=(GW,)):
    """The key table coc-run would give endpoint ``self_id``."""
    return keys.table(keys.issue(SECRET, self_id, peers, set(gateways)), "test")


def test_pair_key_is_the_documented_hmac_and_binds_ids_and_kinds():
    def documented(lo, lo_kind, hi, hi_kind):
        ends = struct.pack("<IBIB", lo, lo_kind, hi, hi_kind)
        return hmac.new(SECRET, b"coc-pair-1" + ends, hashlib.sha256).digest()

    assert engine.pair_key(SECRET, 3, 9, b_gateway=True) == documented(3, 0, 9, 1)
    assert engine.pair_key(SECRET, 9, 3, a_gateway=True) == documented(3, 0, 9, 1)
    assert engine.pair_key(SECRET, 3, 9) != documented(3, 0, 9, 1)
    with pytest.raises(ValueError, match="16 to 64 bytes"):
        engine.pair_key(b"short", 1, 2)


def test_an_engine_takes_a_secret_or_keys_not_both_and_checks_them():
    key = engine.pair_key(SECRET, 1, 2)
    for kwargs, message in [({}, "not both or neither"),
                            ({"secret": SECRET, "keys": {2: (key, False)}}, "not both"),
                            ({"keys": {2: (key[:5], False)}}, "must be 32 bytes"),
                            ({"keys": {2: key}}, r"must be \(key bytes, is_gateway\)"),
                            ({"keys": {1: (key, False)}}, "a key for itself")]:
        with pytest.raises(ValueError, match=message):
            engine.Engine(1, **kwargs)
    with pytest.raises(ValueError, match="endpoint '2x'"):
        keys.table({"2x": {"key": "zz", "gateway": False}}, "the welcome")


def test_endpoints_with_issued_keys_talk_through_a_gateway_but_cannot_claim_another_id(
        open_engine, gateway):
    me = open_engine(1, secret=None, keys=issued(1, [GW]))
    other = open_engine(2, secret=None, keys=issued(2, [GW]))
    gw = gateway(GW, peers={1: me.address, 2: other.address},
                 routes={1: [[1, 1]], 2: [[2, 1]]})
    for eng, dest in ((me, 2), (other, 1)):
        eng.add_peer(GW, gw.address)
        eng.set_route(dest, [GW])
    out = bytearray(5)
    r = other.irecv(out, 1, tag=1)
    me.isend(b"hello", 2, tag=1).wait(TIMEOUT)
    assert r.wait(TIMEOUT).count == 5 and out == b"hello"
    # an engine claiming endpoint 2 with everything endpoint 1 holds
    impostor = open_engine(2, secret=None, keys=issued(1, [GW]))
    impostor.add_peer(GW, gw.address)
    impostor.set_route(1, [GW])
    with pytest.raises(errors.AuthenticationError,
                       match="the next hop towards endpoint 1 failed authentication"):
        impostor.isend(b"I am 2", 1, tag=2).wait(TIMEOUT)
    # The impostor may see its side of the failed handshake before the gateway counted its own.
    deadline = time.monotonic() + TIMEOUT
    while gw.stats()["auth_failures"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gw.stats()["auth_failures"] == 1
    assert me.iprobe(2, tag=2) is None
    # an endpoint that holds no key for a peer refuses it, even one holding the secret
    me.add_peer(3, open_engine(3).address)
    me.set_route(3, [3])
    with pytest.raises(errors.CocError):
        me.isend(b"x", 3).wait(TIMEOUT)
    assert any("holds no key for" in line for line in me.take_log())


def _tcp(address):
    host, port = next(a for a in address.split() if a.startswith("tcp://"))[6:].split(":")
    return socket.create_connection((host, int(port)), timeout=TIMEOUT)


def _unix(address):
    name = next(a for a in address.split() if a.startswith("unix:@"))[6:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect("\0" + name)
    return sock


def _raw_endpoint(gw_address, self_id, unix=False, incarnation=None, then=b""):
    """Do the handshake by hand as endpoint ``self_id`` with its key for the gateway, as
    the process ``incarnation`` (a fresh random one unless given); ``then``: frames sent
    in the same write as the proof, so the gateway reads them in the round it opens the
    connection."""
    sock = _unix(gw_address) if unix else _tcp(gw_address)
    nonce = os.urandom(32)
    mine = incarnation or int.from_bytes(os.urandom(4), "little") | 1
    sock.sendall(b"COCH" + struct.pack("<BBHII", 2, 1, 0, self_id, mine) + nonce)
    theirs = _read(sock, 48)
    their_id, their_incarnation = struct.unpack_from("<II", theirs, 8)
    their_nonce = theirs[16:]
    key = engine.pair_key(SECRET, self_id, their_id, b_gateway=True)
    proof = hmac.new(key, b"coc-auth-3" + bytes([1]) + nonce + their_nonce +
                     struct.pack("<IIII", self_id, their_id, mine, their_incarnation),
                     hashlib.sha256).digest()
    sock.sendall(proof + then)
    assert len(_read(sock, 32)) == 32
    return sock


def _read(sock, n):
    data = b""
    while len(data) < n and (chunk := sock.recv(n - len(data))):
        data += chunk
    return data


def _eager(source, dest, tag, payload):
    return struct.pack("<BBBBIIIiIQQQQQ", 0xC0, 1, 1, 0, 0, source, dest, tag, len(payload),
                       0, 0, len(payload), 0, 0) + payload


def _bye(source, dest):
    return struct.pack("<BBBBIIIiIQQQQQ", 0xC0, 1, 6, 0, 0, source, dest, 0, 0, 0, 0, 0, 0, 0)


def test_a_frame_with_another_endpoints_source_is_dropped_at_the_gateway(open_engine, gateway):
    me = open_engine(1)
    gw = gateway(GW, peers={1: me.address}, routes={1: [[1, 1]]})
    forger = _raw_endpoint(gw.address, 7)
    forger.sendall(_eager(5, 1, 1, b"from 5"))
    assert _read(forger, 1) == b""                  # dropped
    forger.close()
    # The gateway tells endpoint 1 that endpoint 7 is lost (an ERROR frame, asynchronous): wait
    # for that before the honest 7 speaks, or the notice could fail the receive posted below.
    deadline = time.monotonic() + TIMEOUT
    while me.stats()["peers_lost"] < 1:
        assert time.monotonic() < deadline, me.stats()
        time.sleep(0.01)
    honest = _raw_endpoint(gw.address, 7)          # the same id, once the first is gone
    honest.sendall(_eager(7, 1, 2, b"from 7"))
    out = bytearray(6)
    assert me.irecv(out, 7, tag=2).wait(TIMEOUT).source == 7 and out == b"from 7"
    assert me.iprobe(tag=1) is None                 # the forged frame went nowhere
    honest.close()
    stats = gw.stats()
    assert stats["protocol_errors"] == 1 and stats["duplicate_ids"] == 0, stats
    assert "sent a frame with source endpoint 5" in gateway_log(gw)


def test_a_second_connection_for_a_connected_id_is_refused_and_the_first_keeps_working(
        open_engine, gateway):
    me = open_engine(1, secret=None, keys=issued(1, [GW]))
    gw = gateway(GW, peers={1: me.address}, routes={1: [[1, 1]]})
    first = _raw_endpoint(gw.address, 7)
    second = _raw_endpoint(gw.address, 7)            # proves 7's key: a second process
    assert _read(second, 1) == b""
    second.close()
    first.sendall(_eager(7, 1, 3, b"still"))
    out = bytearray(5)
    assert me.irecv(out, 7, tag=3).wait(TIMEOUT).count == 5 and out == b"still"
    first.close()
    stats = gw.stats()
    assert stats["duplicate_ids"] == 1 and stats["auth_failures"] == 0, stats
    assert "refused: endpoint 7 is connected already (tcp from 127.0.0.1:" in gateway_log(gw)


def test_a_hello_of_the_older_handshake_is_refused_naming_the_versions(open_engine, gateway):
    # Version 1 had no incarnation (its bytes 12-15 were zero): a peer of that coc is told
    # apart by its version byte, and the gateway's log says what to do.
    me = open_engine(1)
    gw = gateway(GW, peers={1: me.address}, routes={1: [[1, 1]]})
    old = _tcp(gw.address)
    old.sendall(b"COCH" + struct.pack("<BBHII", 1, 1, 0, 7, 0) + os.urandom(32))
    assert len(_read(old, 48)) == 48                # its hello, then the end
    assert _read(old, 1) == b""
    old.close()
    wait_for_log(gw, "an older coc (handshake version 1; this one speaks 2): use one coc release")


WINDOW = 1 << 20   # the gateway's forwarding window in the test below


def _fill_until_unread(sock, source, dest, gw):
    """Send eager frames ``source`` -> ``dest`` on ``sock`` until the gateway's forwarding
    window for ``dest`` is full and ``sock`` is full behind it: the next header the gateway
    reads pauses ``sock`` (until half the window drains, which never happens here), so
    what follows it waits unread at the gateway."""
    sock.setblocking(False)
    frame = _eager(source, dest, 1, bytes(32 << 10))
    pending, deadline = frame, time.monotonic() + TIMEOUT
    while True:
        full = gw.stats()["forward_bytes_buffered_max"] + len(frame) > WINDOW
        try:  # fill the socket after that look: frames behind the pausing header
            while True:
                pending = pending[sock.send(pending):] or frame
        except BlockingIOError:
            pass
        if full:
            return
        assert time.monotonic() < deadline, f"the gateway's window never filled: {gw.stats()}"
        time.sleep(0.01)


def _paused_behind_a_deaf_endpoint(open_engine, gateway, monkeypatch):
    """A gateway routing endpoint 7 -> endpoint 2, where 2 connects and reads nothing and
    7 has filled the forwarding window, so the gateway stopped reading 7 with 7's frames
    unread behind it. Unix sockets: their buffers do not grow, so a full window stays
    full. Returns (the engine of endpoint 1, the gateway, 2's socket, 7's socket)."""
    monkeypatch.setenv("COC_LIVENESS_MS", "600000")   # 2 stays silent without being judged
    me = open_engine(1)
    gw = gateway(GW, peers={1: me.address}, routes={1: [[1, 1]], 2: [[2, 1]]},
                 options={"forward_window": WINDOW})
    deaf = _raw_endpoint(gw.address, 2, unix=True)
    old = _raw_endpoint(gw.address, 7, unix=True)
    _fill_until_unread(old, 7, 2, gw)
    return me, gw, deaf, old


def test_a_connection_closed_with_frames_unread_is_replaced_not_defended(
        open_engine, gateway, monkeypatch):
    # Endpoint 7's frames to endpoint 2 wait unread at the gateway (2 reads nothing, so the
    # forwarding window is full and the gateway stopped reading 7) when 7 closes and dials
    # again, as an endpoint does that judged its gateway silent. The old connection is
    # readable (data, then the end of stream behind it), yet it has ended: the new one is
    # accepted, not refused as a second process claiming 7, and carries 7's frames.
    me, gw, deaf, old = _paused_behind_a_deaf_endpoint(open_engine, gateway, monkeypatch)
    old.close()
    new = _raw_endpoint(gw.address, 7, unix=True)
    new.sendall(_eager(7, 1, 4, b"again"))
    out = bytearray(5)
    assert me.irecv(out, 7, tag=4).wait(TIMEOUT).count == 5 and out == b"again"
    stats = gw.stats()
    assert stats["duplicate_ids"] == 0, stats
    assert "closed; replaced by a new connection" in gateway_log(gw)
    new.close()
    deaf.close()


def test_a_paused_connection_whose_peer_hung_up_waits_without_spinning(
        open_engine, gateway, monkeypatch):
    # Endpoint 7's connection is paused on the gateway's full forwarding window when 7 hangs
    # up. The poller reports a hang-up whatever is asked of it, so the paused connection
    # used to wake the gateway's progress thread round after round: 1 s of CPU per second
    # until the window drained (0.6 s beside two busy loops). Out of the poller while
    # paused, the gateway sleeps; once the window drains, what 7 sent before it hung up
    # is still forwarded.
    _, gw, deaf, old = _paused_behind_a_deaf_endpoint(open_engine, gateway, monkeypatch)
    old.close()
    time.sleep(0.2)                                   # the hang-up reaches the gateway
    forwarded = gw.stats()["frames_forwarded"]
    cpu = cpu_seconds(gw.pid)
    time.sleep(1.0)
    assert cpu_seconds(gw.pid) - cpu < 0.3           # asleep, not woken round after round
    deaf.settimeout(TIMEOUT)                          # 2 reads: the window drains
    deadline = time.monotonic() + TIMEOUT
    while gw.stats()["frames_forwarded"] <= forwarded + 4:
        assert time.monotonic() < deadline, gw.stats()
        assert deaf.recv(1 << 20)
    deaf.close()


def test_a_dial_back_that_finds_the_endpoints_bye_is_an_orderly_close(open_engine, gateway):
    # Endpoint 7 sent to endpoint 1 through the gateway, then dials the gateway again as the
    # same process (as one does that judged its gateway silent) and says BYE on the new
    # connection at once: it is leaving. The gateway fails the old connection (replaced),
    # which ended without BYE, and dials 7 back before reporting it; the dial finds the new
    # connection, which already said BYE. That is an orderly close: 7 is not "alive" (no
    # PATH frame tells 1 to send to it again), nor lost (no ERROR frame).
    me = open_engine(1)
    gw = gateway(GW, peers={1: me.address}, routes={1: [[1, 1]]})
    incarnation = int.from_bytes(os.urandom(4), "little") | 1
    old = _raw_endpoint(gw.address, 7, incarnation=incarnation)
    old.sendall(_eager(7, 1, 5, b"before"))
    out = bytearray(6)
    assert me.irecv(out, 7, tag=5).wait(TIMEOUT).count == 6 and out == b"before"
    new = _raw_endpoint(gw.address, 7, incarnation=incarnation, then=_bye(7, GW))
    wait_for_log(gw, "said BYE on its new connection", "answers a new connection after")
    assert "said BYE on its new connection" in gateway_log(gw), gateway_log(gw)
    stats = gw.stats()
    assert stats["peers_dialed_back"] == 0 and stats["peers_lost"] == 0, stats
    new.close()
    old.close()
    time.sleep(0.5)                                  # a PATH or ERROR frame would be here by now
    log = me.take_log()
    assert not [line for line in log if "endpoint 7" in line], log
    assert me.stats()["peers_lost"] == 0
