"""Programs the engine tests run in child processes (spawned, so this module is importable).

Each scenario is ``scenario(eng, conn, **args)``: ``eng`` is the child's open engine with its
peers and routes set, ``conn`` the pipe to the test; the return value goes back to the test.
"""

import contextlib
import os
import signal
import time
import traceback

import numpy as np

from coc._native import engine
from coc.routes import apply_routes, parse_routes
from hang_bounds import scaled

TIMEOUT = scaled(30.0)
SECRET = bytes(range(32))  # the job secret every test endpoint shares


def run(conn, self_id, secret, engine_kwargs, scenario, args, hold):
    """Open an engine, trade addresses with the test, then run ``scenario``.

    With ``hold`` the engine stays open after the scenario until the test has read the
    result, so nothing in flight is cut off by this process leaving early.
    """
    try:
        with engine.Engine(self_id, secret, listen_host="127.0.0.1", **engine_kwargs) as eng:
            conn.send(eng.address)
            peers, routes = conn.recv()
            for pid, address in peers.items():
                eng.add_peer(pid, address)
            apply_routes(eng, parse_routes(routes))
            conn.send("ready")
            conn.send(("ok", globals()[scenario](eng, conn, **args)))
            if hold and conn.poll(TIMEOUT * 4):
                conn.recv()
    except BaseException as exc:  # report everything, KeyboardInterrupt included
        conn.send(("error", type(exc).__name__, str(exc), traceback.format_exc()))


def rss_bytes(pid):
    """Return the resident memory of process ``pid``."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def proc_stat(pid):
    """The fields of /proc/PID/stat after the command name (state first)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def minor_faults(pid):
    """Return how many minor page faults process ``pid`` has taken (fresh pages touched)."""
    return int(proc_stat(pid)[7])


def cpu_seconds(pid):
    """User + system CPU time of process ``pid`` so far."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def sigstopped(pid):
    """Keep process ``pid`` stopped (SIGSTOP) for the ``with`` block; resume it however the
    block ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def gateway_log(gw):
    """A gateway daemon's log so far (its stderr file, which the ``gateway`` fixture keeps)."""
    gw.log.seek(0)
    return gw.log.read().decode(errors="replace")


def wait_for_log(gw, *texts):
    """Wait until the gateway's log has a line with one of ``texts`` (the daemon moves its
    engine's lines there every ``log_interval``); fail with the log if none comes."""
    deadline = time.monotonic() + TIMEOUT
    while not any(text in gateway_log(gw) for text in texts):
        assert time.monotonic() < deadline, f"no {texts} in the gateway's log:\n{gateway_log(gw)}"
        time.sleep(0.05)


def round_trips(me, peer, sizes):
    """Send message i of ``sizes[i]`` bytes to ``peer`` (an ``echo`` child) with tag i and
    check that the same bytes come back."""
    for i, size in enumerate(sizes):
        data = payload(i, size)
        out = np.zeros(size, dtype=np.uint8)
        r = me.irecv(out, peer, tag=i)
        me.isend(data, peer, tag=i).wait(TIMEOUT)
        assert r.wait(TIMEOUT).count == size
        assert (out == data).all()


def payload(seq, size):
    """Bytes of message ``seq``: its number in the first 8 bytes, then a pattern."""
    buf = np.full(size, seq % 251, dtype=np.uint8)
    if size >= 8:
        buf[:8] = np.frombuffer(np.uint64(seq).tobytes(), dtype=np.uint8)
    return buf


def seq_of(buf):
    """Return the sequence number :func:`payload` wrote into ``buf``."""
    return int(np.frombuffer(bytes(buf[:8]), dtype=np.uint64)[0])


def echo(eng, conn, peer, count, capacity=8 << 20):
    """Send ``count`` messages back to ``peer`` with their tag and context."""
    buf = bytearray(capacity)
    for _ in range(count):
        st = eng.irecv(buf, peer, engine.ANY_TAG).wait(TIMEOUT)
        eng.isend(memoryview(buf)[:st.count], peer, st.tag).wait(TIMEOUT)
    return count


def send_stream(eng, conn, dest, sizes, contexts=1, start_after=None):
    """Send message i (of sizes[i] bytes) on context i % contexts, all posted at once."""
    if start_after:
        assert conn.recv() == start_after
    msgs = [payload(i, n) for i, n in enumerate(sizes)]
    reqs = [eng.isend(m, dest, tag=i % 1000, context=i % contexts) for i, m in enumerate(msgs)]
    for r in reqs:
        r.wait(TIMEOUT)
    return len(reqs)


def send_tagged(eng, conn, dest, items):
    """Send each (tag, bytes) item in turn."""
    for tag, data in items:
        eng.isend(data, dest, tag).wait(TIMEOUT)
    return len(items)


def send_repeated(eng, conn, dest, size, count):
    """Send the same ``size`` bytes ``count`` times."""
    data = np.ones(size, dtype=np.uint8)
    for _ in range(count):
        eng.isend(data, dest).wait(TIMEOUT)
    return count


def try_sends(eng, conn, dest, sizes):
    """Send messages of ``sizes``; return per message the error's class name or None."""
    outcomes = []
    for size in sizes:
        try:
            eng.isend(bytes(size), dest).wait(10)
            outcomes.append(None)
        except Exception as exc:  # the test asserts which
            outcomes.append(type(exc).__name__)
    return outcomes


def recv_stream(eng, conn, source, sizes):
    """Post receives for ``sizes`` from ``source``, report "posted", return sequence numbers."""
    bufs = [np.empty(n, dtype=np.uint8) for n in sizes]
    reqs = [eng.irecv(b, source, engine.ANY_TAG) for b in bufs]
    conn.send("posted")
    for r in reqs:
        r.wait(120)
    return [seq_of(b) for b in bufs], all((b[8:] == i % 251).all() for i, b in enumerate(bufs))


def connect_and_idle(eng, conn, hop):
    """Connect to ``hop`` at once, report "connected", then idle until killed."""
    eng.connect(hop)
    conn.send("connected")
    time.sleep(TIMEOUT * 4)


def die_mid_send(eng, conn, dest, size, after):
    """Start sending ``size`` bytes, then kill this process after ``after`` seconds."""
    data = np.ones(size, dtype=np.uint8)
    eng.isend(data, dest)
    time.sleep(after)
    os.kill(os.getpid(), signal.SIGKILL)


def wait_forever(eng, conn, how):
    """Block in a receive ("wait") or probe nobody answers; return when Ctrl-C ended it."""
    req = eng.irecv(bytearray(8), engine.ANY_SOURCE)
    block = req.wait if how == "wait" else lambda: eng.probe(tag=5)
    # Ctrl-C raises KeyboardInterrupt even when this process was started with SIGINT ignored
    # (a test run in the background of a non-interactive shell inherits SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:                       # a Ctrl-C that comes early still ends here, not in a traceback
        conn.send("waiting")
        block()
    except KeyboardInterrupt:
        return time.monotonic()
    return None


def echo_then_wait(eng, conn, peer, count):
    """:func:`echo` ``count`` messages, then block in a receive from ``peer`` until Ctrl-C;
    return when that ended it (None if the receive ended otherwise)."""
    echo(eng, conn, peer, count)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as wait_forever
    try:
        conn.send("waiting")
        eng.irecv(bytearray(8), peer).wait()
    except KeyboardInterrupt:
        return time.monotonic()
    return None


def random_bytes(size, seed):
    """``size`` bytes that differ at every position (a misplaced fragment shows)."""
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def recv_digest(eng, conn, source, sizes, connect=()):
    """Connect to the ``connect`` hops, receive one message per size from ``source``;
    return per message its SHA-256 and count, or the error's class name."""
    import hashlib
    for hop in connect:
        eng.connect(hop)
    out = []
    for size in sizes:
        buf = np.empty(size, dtype=np.uint8)
        try:
            st = eng.irecv(buf, source).wait(TIMEOUT)
            out.append((hashlib.sha256(buf[:st.count]).hexdigest(), st.count))
        except Exception as exc:  # the test asserts which
            out.append(type(exc).__name__)
    return out


def echo_after(eng, conn, peer, count, pauses, capacity=8 << 20):
    """:func:`echo`, pausing ``pauses[i % len(pauses)]`` seconds before answer ``i``."""
    buf = bytearray(capacity)
    for i in range(count):
        st = eng.irecv(buf, peer, engine.ANY_TAG).wait(TIMEOUT)
        if pauses[i % len(pauses)]:
            time.sleep(pauses[i % len(pauses)])
        eng.isend(memoryview(buf)[:st.count], peer, st.tag).wait(TIMEOUT)
    return count
