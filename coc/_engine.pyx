# cython: language_level=3
"""Thin binding of coc's native engine (native/include/coc/coc.h).

Everything here is C-shaped: one :class:`Engine` per process, non-blocking sends and
receives that return an :class:`EngineRequest`, waits that release the GIL. The friendly API
(communicators, collectives, asyncio awaitables) is Python on top of it; its own ``Request``
and ``Status`` (:mod:`coc.comm.request`) are other types, hence the ``Engine`` prefix here.

Buffers travel through the buffer protocol without copies: a request holds its buffer
(``Py_buffer``) until the engine is done with it, even when the caller drops the request
early, because the engine keeps every pending request referenced until it completes.
"""
cimport cython
from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE,
                             PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer)
from cpython.exc cimport PyErr_CheckSignals
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.errno cimport EACCES, EADDRINUSE
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport getpid

cimport coc._cengine as c

cdef extern from "Python.h":
    # Calls with keywords named in a tuple, no dict made per call (Python >= 3.9).
    object PyObject_Vectorcall(object callable, PyObject **args, size_t nargsf, object kwnames)
    size_t PY_VECTORCALL_ARGUMENTS_OFFSET

import os
import time
import warnings

from coc import errors as _errors

__all__ = ["ANY_SOURCE", "ANY_TAG", "MAX_TAG", "KEY_LEN", "Engine", "EngineRequest",
           "EngineStatus", "Message", "Direct", "BufferRequest", "wait_all", "test_all",
           "plain_dumps", "plain_loads", "Counters",
           "strerror", "error", "raise_for", "version",
           "selftest", "pair_key"]

ANY_SOURCE = c.COC_ANY_SOURCE
ANY_TAG = c.COC_ANY_TAG
MAX_TAG = c.COC_MAX_TAG
KEY_LEN = c.COC_KEY_LEN
# size classes of set_route (None: both)
_SIZE_CLASSES = {None: -1, "small": c.COC_CLASS_SMALL, "large": c.COC_CLASS_LARGE}
# the keyword of Direct._stream's call of pickle.dumps
cdef tuple _CALLBACK_KEYWORD = ("buffer_callback",)

# A blocking call waits in slices this long with the GIL released, then checks signals,
# so Ctrl-C interrupts a wait within a slice.
cdef enum:
    SLICE_NS = 50_000_000

# coc's own codes, by the Python exception class each becomes.
_COC_CODES = {
    c.COC_EPROTO: _errors.ProtocolError,
    c.COC_EAUTH: _errors.AuthenticationError,
    c.COC_ETRUNC: _errors.TruncationError,
    c.COC_EPEERLOST: _errors.PeerLost,
    c.COC_ENOROUTE: _errors.NoRouteError,
    c.COC_ECLOSED: _errors.ClosedError,
    c.COC_ETIMEDOUT: _errors.CocTimeoutError,
    c.COC_EINVAL: _errors.EngineValueError,
    c.COC_ECANCELED: _errors.CancelledError,
}


def strerror(int rc):
    """Return the engine's text for a return code (a negative errno or a coc code)."""
    return c.coc_strerror(rc).decode()


def error(int rc, str message, kind=None, **context):
    """Return the exception for the engine's negative return code ``rc``: the one place
    engine exceptions are built.

    errno-range codes become ``OSError(-rc, message)``, which Python narrows by itself
    (``ConnectionRefusedError`` and friends); coc codes become the :mod:`coc.errors` class
    of the code (``kind``, a subclass of it, when given), carrying ``code=rc`` and the
    ``context`` keywords the class takes (``source``, ``tag``, ``peer`` ...).
    """
    if not c.coc_is_coc_error(rc):
        return OSError(-rc, message)
    return (kind or _COC_CODES.get(rc, _errors.EngineError))(message, code=rc, **context)


cdef int check(int rc, str context=None) except -1:
    """Raise the exception for a negative return code; return rc otherwise."""
    if rc >= 0:
        return rc
    msg = c.coc_strerror(rc).decode()
    raise error(rc, f"{context}: {msg}" if context else msg)


def raise_for(int rc, str context=None):
    """Raise what :func:`check` raises for ``rc`` (for tests and pure-Python callers)."""
    check(rc, context)
    return rc


def version():
    """Return the native engine's version string."""
    return c.coc_version().decode()


# Forks into a child this process has seen. An engine belongs to the process that opened it
# (its threads do not survive a fork); comparing this count instead of calling getpid()
# spares a system call on every engine call (glibc does not cache the pid).
cdef unsigned long _forks = 0


def _forked():
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


cdef long _env_int(str name, int base):
    """The integer in environment variable `name` (C's strtol `base`), or 0 when unset."""
    text = os.environ.get(name, "").strip()
    if not text:
        return 0
    try:
        return int(text, base)
    except ValueError:
        raise _errors.EngineValueError(
            f"environment variable {name}={text!r} is not an integer") from None


cdef int _env_knobs(c.coc_engine_config *cfg) except -1:
    """Fill the engine knobs users set through the environment (the C library reads none):
    COC_SHM=0/1 overrides the shared-memory flags, COC_SHM_RING gives the ring bytes per
    direction, COC_LIVENESS_MS the liveness timeout, COC_SPIN_NS overrides spin_ns (for
    measuring), COC_SEND_HOLD_NS send coalescing's hold where not given, COC_SPIN_LOAD=ignore
    lets waits spin whatever the machine's load. docs/engine.md lists them."""
    shm = os.environ.get("COC_SHM", "")
    if shm:
        cfg.flags &= ~<uint32_t>(c.COC_ENGINE_SHM | c.COC_ENGINE_NO_SHM)
        cfg.flags |= c.COC_ENGINE_NO_SHM if shm == "0" else c.COC_ENGINE_SHM
    ring = _env_int("COC_SHM_RING", 0)
    if ring:
        if ring < 4096 or ring > (64 << 20) or ring & (ring - 1):
            raise _errors.EngineValueError(
                f"environment variable COC_SHM_RING={ring}: the ring size must be a power "
                "of two from 4096 to 67108864 bytes")
        cfg.shm_ring = ring
    if not cfg.liveness_ms:
        cfg.liveness_ms = _env_int("COC_LIVENESS_MS", 0)
    if os.environ.get("COC_SPIN_NS", "").strip():
        cfg.spin_ns = _env_int("COC_SPIN_NS", 10)
    if not cfg.send_hold_ns:
        cfg.send_hold_ns = _env_int("COC_SEND_HOLD_NS", 10)
    spin_load = os.environ.get("COC_SPIN_LOAD", "").strip()
    if spin_load not in ("", "check", "ignore"):
        raise _errors.EngineValueError(
            f"environment variable COC_SPIN_LOAD={spin_load}: expected 'ignore' (spin "
            "whatever the machine's load) or 'check' (the default)")
    if spin_load == "ignore":
        cfg.flags |= c.COC_ENGINE_SPIN_ANY_LOAD
    return 0


cdef const unsigned char[::1] _secret_bytes(object secret, object who) except *:
    """Return ``secret`` as bytes of an allowed length, or raise ValueError naming ``who``."""
    cdef const unsigned char[::1] key = bytes(memoryview(secret))  # bytes-like only
    if not c.COC_SECRET_MIN <= key.shape[0] <= c.COC_SECRET_MAX:
        raise ValueError(f"{who}: the job secret must be {c.COC_SECRET_MIN} to "
                         f"{c.COC_SECRET_MAX} bytes, not {key.shape[0]}")
    return key


def pair_key(secret, a, b, *, a_gateway=False, b_gateway=False):
    """Return K(a, b): the key endpoints ``a`` and ``b`` prove on their connection.

    Derived from the job's secret by HMAC-SHA256 (``coc_pair_key`` in coc.h); the same for
    (a, b) and (b, a). ``a_gateway``/``b_gateway`` say which end is a gateway daemon: the
    kind is part of the key, so a rank cannot pass for a gateway. The launcher issues these
    to ranks (:mod:`coc.keys`); ranks never hold the secret itself.
    """
    cdef const unsigned char[::1] s = _secret_bytes(secret, f"pair key of {a} and {b}")
    cdef unsigned char out[32]
    check(c.coc_pair_key(&s[0], s.shape[0], a, c.COC_PEER_GATEWAY if a_gateway else 0,
                         b, c.COC_PEER_GATEWAY if b_gateway else 0, out),
          f"pair key of {a} and {b}")
    return out[:c.COC_KEY_LEN]


def selftest():
    """Run the engine's built-in self-test; raise on failure."""
    cdef int rc
    with nogil:
        rc = c.coc_selftest()
    check(rc, "engine self-test")


cdef int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1_000_000_000 + ts.tv_nsec


cdef int64_t _deadline(object timeout) except -2:
    """Turn a timeout in seconds (None: no limit) into a monotonic deadline in ns (-1: none)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0 or None, not {timeout!r}")
    return _now_ns() + <int64_t>(timeout * 1e9)


cdef int64_t _slice_ns(int64_t deadline) noexcept nogil:
    """Return the length of the next wait slice (0 once the deadline has passed)."""
    cdef int64_t remaining
    if deadline < 0:
        return SLICE_NS
    remaining = deadline - _now_ns()
    return 0 if remaining <= 0 else min(<int64_t>SLICE_NS, remaining)


cdef class EngineStatus:
    """Where a completed message came from and how large it was.

    ``count`` is the full size of the message in bytes (also when it was truncated).
    """
    cdef readonly int source
    cdef readonly int tag
    cdef readonly unsigned int context
    cdef readonly unsigned long long count

    def __init__(self, int source, int tag, unsigned int context, unsigned long long count):
        self.source, self.tag, self.context, self.count = source, tag, context, count

    def __eq__(self, other):
        if not isinstance(other, EngineStatus):
            return NotImplemented
        return self._key() == (<EngineStatus>other)._key()

    def __hash__(self):
        return hash(self._key())

    cdef tuple _key(self):
        return (self.source, self.tag, self.context, self.count)

    def __repr__(self):
        return (f"EngineStatus(source={self.source}, tag={self.tag}, context={self.context}, "
                f"count={self.count})")


cdef EngineStatus _status(c.coc_status *st):
    return EngineStatus(st.source, st.tag, st.context, st.count)


cdef Message _take_message(c.coc_request *r):
    """The engine memory a completed receive of any size filled, as a :class:`Message`
    (None when it has none); the request keeps no claim on it."""
    cdef size_t n = 0
    cdef void *p = c.coc_request_take_buffer(r, &n)
    cdef Message m
    if p == NULL:
        return None
    m = Message.__new__(Message)
    m._p, m._n = p, n
    return m


@cython.final
cdef class Message:
    """The bytes of a message the engine received into memory of its own (exact size).

    Returned by :meth:`EngineRequest.message` after :meth:`Engine.irecv_alloc`; a writable
    buffer (``memoryview(msg)``, ``numpy.frombuffer(msg, ...)``) over the engine's memory,
    no copy. The memory is freed when the last view of it goes.
    """
    cdef void *_p
    cdef Py_ssize_t _n

    def __cinit__(self):
        self._p = NULL
        self._n = 0

    def __dealloc__(self):
        if self._p != NULL:
            c.coc_buffer_free(self._p)
            self._p = NULL

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self._p, self._n, 0, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __len__(self):
        return self._n

    def __repr__(self):
        return f"<coc._engine.Message {self._n} bytes>"


@cython.no_gc_clear
cdef class EngineRequest:
    """A non-blocking send or receive in flight; holds its buffer until the engine is done.

    Obtain one from :meth:`Engine.isend` or :meth:`Engine.irecv`, never directly.
    """
    cdef c.coc_request *_r
    cdef Engine _engine
    cdef Py_buffer _view
    cdef bint _has_view
    cdef bint _is_send
    cdef int _peer          # destination of a send, requested source of a receive
    cdef int _tag
    cdef unsigned int _context
    cdef bint _peer_exited  # failed because its source exited (Engine.peer_exited)
    cdef int _error         # the operation's own error once complete
    cdef bint _complete     # the outcome is in _st and _error
    cdef c.coc_status _st   # the engine's status once complete (no object made for it)
    cdef Py_ssize_t _size   # bytes of the buffer
    cdef int _waiters       # threads inside coc_wait on this request (GIL released)
    cdef Py_buffer *_views  # a gather-send's buffers (isendv), _nviews of them
    cdef Py_ssize_t _nviews
    cdef bint _alloc        # irecv_alloc: the engine allocates the buffer
    cdef Message _message   # irecv_alloc: the message's bytes, once complete

    def __cinit__(self):
        self._r = NULL
        self._has_view = False

    def __dealloc__(self):
        # Normally _r is NULL here: a pending request is referenced by its engine.
        if self._r != NULL and self._engine is not None and self._engine._owned():
            c.coc_request_free(self._r)
        self._r = NULL
        self._release()

    cdef void _release(self):
        cdef Py_ssize_t i
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False
        if self._views != NULL:
            for i in range(self._nviews):
                PyBuffer_Release(&self._views[i])
            free(self._views)
            self._views = NULL

    cdef void _finish(self, c.coc_status *st):
        """Record the outcome, free the C request, release the buffer, leave the engine."""
        self._st = st[0]
        self._error = st.error
        self._complete = True
        if self._alloc and self._r != NULL:
            self._message = _take_message(self._r)
        self._free()
        self._release()
        self._engine._pending.discard(self)

    cdef void _free(self):
        """Free the C request of a completed request once no thread waits inside it."""
        if self._r != NULL and self._waiters == 0:
            c.coc_request_free(self._r)
            self._r = NULL

    cdef void _orphan(self, int error):
        """Forget the C request freed by the engine's close; complete with ``error``."""
        self._r = NULL
        if not self._complete:
            self._st.source, self._st.tag, self._st.context, self._st.count = \
                self._peer, self._tag, 0, 0
            self._error = error
            self._complete = True
        self._release()

    cdef bint _poll(self) except -1:
        """Test the C request without blocking; True once complete."""
        cdef c.coc_status st
        cdef int rc
        if self._complete:
            return True
        if self._r == NULL:
            return False
        rc = c.coc_test(self._r, &st)
        if rc < 0:
            check(rc, self._what())
        if rc == 1:
            self._finish(&st)
            return True
        return self._fail_if_source_exited()

    cdef bint _fail_if_source_exited(self) except -1:
        """Complete a receive whose source has exited, if it has not matched; True if so.

        Only after the exit notice has settled (:meth:`Engine.peer_exited`), so that a
        message the peer sent before it exited and that is still on its way matches first.
        """
        cdef c.coc_status st
        cdef int64_t since
        if self._is_send or self._r == NULL or self._waiters:
            return False
        since = self._engine._exited.get(self._peer, -1)
        if since < 0 or _now_ns() < since:
            return False
        if c.coc_cancel(self._r) != 0 or c.coc_test(self._r, &st) != 1:
            return False                     # it matched meanwhile: it completes normally
        self._peer_exited = True
        self._finish(&st)
        return True

    cdef str _what(self):
        if self._is_send:
            return f"send to endpoint {self._peer} (tag {self._tag})"
        source = "any source" if self._peer == c.COC_ANY_SOURCE else f"endpoint {self._peer}"
        tag = "any tag" if self._tag == c.COC_ANY_TAG else f"tag {self._tag}"
        return f"receive from {source} ({tag})"

    cdef int _check(self) except -1:
        """Raise the error a completed request ended with (nothing when it succeeded)."""
        cdef c.coc_status *s = &self._st
        cdef int err = self._error
        if self._peer_exited:
            raise error(
                c.COC_EPEERLOST,
                f"endpoint {self._engine.self_id}: {self._what()}: endpoint {self._peer} "
                "exited without sending a matching message", _errors.PeerExited,
                peer=self._peer, waiter=self._engine.self_id, tag=self._tag)
        if err == 0:
            return 0
        if err == c.COC_ETRUNC:
            raise error(
                err, f"message from endpoint {s.source} with tag {s.tag} is {s.count} bytes "
                f"but the receive buffer holds only {self._size} bytes",
                source=s.source, tag=s.tag, size=s.count, capacity=self._size)
        if err == c.COC_EAUTH:
            address = self._engine._addresses.get(self._peer)
            where = (f"endpoint {self._peer} at {address}" if address is not None
                     else f"the next hop towards endpoint {self._peer}")
            raise error(
                err, f"{self._what()}: {where} failed authentication: "
                "the two ends do not hold the same key for this pair of endpoints (is it part "
                "of this job, and the endpoint it claims to be?)")
        if err == c.COC_EPEERLOST:
            peer = s.source if (not self._is_send and s.source >= 0) else self._peer
            raise error(err, f"{self._what()}: endpoint {peer} lost ({strerror(err)})",
                        peer=peer)
        check(err, self._what())
        return 0  # not reached: err is negative

    cdef EngineStatus _outcome(self):
        """Return the status of a completed request or raise its error."""
        self._check()
        return _status(&self._st)

    cdef int _block(self, object timeout) except -1:
        """Return once the request is complete (its outcome in ``_st``, not checked).

        Waits with the GIL released, in slices, so that Ctrl-C interrupts it (the
        request stays pending); each slice is one of the engine's waits, counted in its
        statistics even when the request was already done. ``timeout`` in seconds raises
        :class:`coc.errors.CocTimeoutError` when it passes, leaving the request pending.
        """
        cdef c.coc_status st
        cdef int rc
        cdef int64_t ns
        cdef c.coc_request *r
        cdef int64_t deadline
        if self._complete:
            return 0
        deadline = _deadline(timeout)
        while True:
            ns = _slice_ns(deadline)
            self._engine._enter()
            if self._complete:  # completed meanwhile in another thread
                self._engine._busy -= 1
                return 0
            r = self._r
            self._waiters += 1
            with nogil:
                rc = c.coc_wait(r, ns, &st)
            self._waiters -= 1
            self._engine._busy -= 1
            if self._complete:  # another thread recorded it first
                self._free()
                return 0
            if rc == 0:
                self._finish(&st)
                return 0
            if rc != c.COC_ETIMEDOUT:
                check(rc, self._what())
            if self._fail_if_source_exited():
                return 0
            PyErr_CheckSignals()
            if deadline >= 0 and _now_ns() >= deadline:
                raise error(c.COC_ETIMEDOUT, f"{self._what()}: not complete after {timeout} s")

    cdef bint _look(self) except -1:
        """Look once, with the GIL held, whether the request is complete (a look is not one
        of the engine's waits: it neither spins nor counts); True when it is. A request
        already done then costs no GIL switch."""
        cdef c.coc_status st
        cdef int rc
        if self._complete:
            return True
        self._engine._enter()
        rc = c.coc_wait(self._r, 0, &st)
        self._engine._busy -= 1
        if rc == 0:
            self._finish(&st)
            return True
        return False

    cdef int _wait_into(self, c.coc_status *st) except -1:
        """Wait (no timeout), raise the request's error or copy its status into ``st``."""
        self._block(None)
        self._check()
        st[0] = self._st
        return 0

    @property
    def done(self):
        """True once the engine has completed the request (successfully or not)."""
        return self._poll()

    def test(self):
        """Return the :class:`EngineStatus` if complete (raising its error), else None."""
        if self._poll():
            return self._outcome()
        return None

    def wait(self, timeout=None):
        """Block until complete and return its :class:`EngineStatus`; raise its error.

        The GIL is released while waiting; Ctrl-C interrupts the wait (the request stays
        pending). ``timeout`` in seconds raises :class:`coc.errors.CocTimeoutError` when it
        passes, leaving the request pending.
        """
        self._block(timeout)
        return self._outcome()

    def message(self):
        """Return the :class:`Message` an :meth:`Engine.irecv_alloc` receive completed with.

        Call it after :meth:`wait` or :meth:`test` returned the status (the bytes of a
        truncated message are its first ``max`` bytes); None for other requests.
        """
        return self._message

    def cancel(self):
        """Cancel a receive that has not matched yet; return True if it was cancelled.

        A cancelled receive completes: :meth:`wait` then raises
        :class:`coc.errors.CancelledError`. Sends and matched receives are not cancelled.
        """
        cdef int rc
        if self._r == NULL:
            return False
        rc = c.coc_cancel(self._r)
        if rc == c.COC_EINVAL:
            return False
        check(rc, self._what())
        return True

    def __repr__(self):
        state = "done" if self._complete else "pending"
        return f"<coc._engine.Request {self._what()} {state}>"


cdef bytearray _key_table(unsigned int self_id, object keys):
    """Return ``{peer id: (key, is_gateway)}`` as an array of coc_peer_key, checked."""
    cdef bytearray table = bytearray(len(keys) * sizeof(c.coc_peer_key))
    cdef c.coc_peer_key *k = <c.coc_peer_key *><char *>table if keys else NULL
    cdef Py_ssize_t i = 0
    for peer, entry in keys.items():
        try:
            value, gateway = entry
            value = bytes(value)
        except (TypeError, ValueError):
            raise ValueError(f"endpoint {self_id}: the key for peer {peer} must be "
                             "(key bytes, is_gateway)") from None
        if len(value) != c.COC_KEY_LEN:
            raise ValueError(f"endpoint {self_id}: the key for peer {peer} must be "
                             f"{c.COC_KEY_LEN} bytes, not {len(value)}")
        if peer == self_id:
            raise ValueError(f"endpoint {self_id}: a key for itself was given")
        k[i].id = peer
        k[i].flags = c.COC_PEER_GATEWAY if gateway else 0
        for j in range(c.COC_KEY_LEN):
            k[i].key[j] = value[j]
        i += 1
    return table


# final: its cdef methods are called directly, not through a table, and the C compiler
# inlines the small ones of the per-message path (_enter, _open_check).
@cython.final
cdef class Engine:
    """This process's endpoint of a coc job: connections, matching and forwarding.

    Parameters
    ----------
    self_id : int
        The endpoint id, unique in the job.
    secret : bytes, optional
        The job's secret (16 to 64 bytes), for a trusted process (a gateway daemon, a
        job of one machine): the engine derives the key of every pair of endpoints from
        it (:func:`pair_key`), so it can talk to any endpoint.
    keys : mapping, optional
        Instead of the secret, for a rank: ``{peer id: (key, is_gateway)}``, the keys the
        launcher issued for the peers this endpoint may talk to directly (:mod:`coc.keys`).
        Every connection proves the key of its two endpoints, so this engine can claim no
        id but ``self_id`` and reach no peer it holds no key for. Give exactly one of
        ``secret`` and ``keys``.
    listen_host : str, optional
        IP address to listen on for TCP; None opens no TCP listener.
    port_range : (int, int)
        Inclusive range for the listening port; ``(0, 0)`` takes any free port.
    eager_limit, fragment_size, forward_window : int
        Tuning knobs in bytes; 0 keeps the engine's default.
    forward : bool
        Forward frames addressed to other endpoints (a gateway).
    handshake_timeout_ms : int
        Drop a connection not authenticated by then; 0 keeps the default.
    spin_ns : int
        How long waits poll before sleeping; 0 keeps the default, negative never spins.
    shm : bool, optional
        Talk to same-host peers through shared memory (True) or their unix socket only
        (False); None keeps the engine's default (shared memory). ``COC_SHM`` in the
        environment overrides both (the binding reads the environment, the C library
        does not: COC_SHM, COC_SHM_RING, COC_LIVENESS_MS, COC_SPIN_NS, COC_SEND_HOLD_NS).
    send_hold_ns : int
        Send coalescing: a frame posted within this long of the one before it to the same
        peer over a socket waits for the frames after it and leaves with them in one
        write, when this process next waits or looks (at the latest 4 x this long later);
        0 keeps ``COC_SEND_HOLD_NS`` from the environment or the default (50 µs), negative
        never holds (docs/engine.md, "Send coalescing").
    """
    cdef c.coc_engine *_e
    cdef int _pid
    cdef unsigned long _fork_gen  # _forks when opened
    cdef int _busy          # threads inside a nogil call on this engine
    cdef bint _closing
    cdef set _pending       # requests not yet completed, kept alive with their buffers
    cdef dict _exited       # {endpoint: monotonic ns from when receives from it fail}
    cdef Py_ssize_t _sweep_at       # pending requests at which _track sweeps
    cdef Py_ssize_t _sweep_floor    # the least _sweep_at (grows after wasted sweeps)
    cdef readonly unsigned int self_id
    cdef dict _addresses    # peer id -> the address given to add_peer (for messages)

    def __cinit__(self):
        self._e = NULL
        self._pending = set()
        self._addresses = {}
        self._exited = {}
        self._sweep_at = self._sweep_floor = 64

    def __init__(self, self_id, secret=None, *, keys=None, listen_host=None,
                 port_range=(0, 0), eager_limit=0, fragment_size=0, forward_window=0,
                 forward=False, handshake_timeout_ms=0, spin_ns=0, shm=None,
                 send_hold_ns=0):
        cdef c.coc_engine_config cfg
        cdef c.coc_engine *e = NULL
        cdef const unsigned char[::1] key
        cdef bytes host = None if listen_host is None else listen_host.encode()
        cdef bytearray table = bytearray()
        cdef int rc
        if (secret is None) == (keys is None):
            raise ValueError(f"endpoint {self_id}: give the job secret (a trusted process) "
                             "or the keys issued to this endpoint, not both or neither")
        port_min, port_max = port_range
        c.coc_engine_config_init(&cfg)
        cfg.self_id = self_id
        if secret is not None:
            key = _secret_bytes(secret, f"endpoint {self_id}")
            cfg.secret = &key[0]
            cfg.secret_len = key.shape[0]
        else:
            table = _key_table(self_id, keys)
            cfg.keys = <const c.coc_peer_key *><char *>table if table else NULL
            cfg.nkeys = len(table) // sizeof(c.coc_peer_key)
        if host is not None:
            cfg.listen_host = host
        cfg.port_min, cfg.port_max = port_min, port_max
        cfg.eager_limit, cfg.fragment_size = eager_limit, fragment_size
        cfg.forward_window = forward_window
        cfg.flags = c.COC_ENGINE_FORWARD if forward else 0
        if shm is not None:
            cfg.flags |= c.COC_ENGINE_SHM if shm else c.COC_ENGINE_NO_SHM
        cfg.handshake_timeout_ms, cfg.spin_ns = handshake_timeout_ms, spin_ns
        cfg.send_hold_ns = send_hold_ns
        _env_knobs(&cfg)
        with nogil:
            rc = c.coc_engine_open(&cfg, &e)
        if rc in (-EADDRINUSE, -EACCES) and (port_min or port_max):
            check(rc, f"open engine for endpoint {self_id}: no free port in the port range "
                      f"{port_min}-{port_max} on {listen_host} (every port in it is in use "
                      f"or refused; widen the range: topology port_range, coc-run "
                      f"--port-range)")
        check(rc, f"open engine for endpoint {self_id}")
        self._e = e
        self._pid = getpid()
        self._fork_gen = _forks
        self.self_id = self_id

    cdef bint _owned(self):
        """True when this process opened the engine (not a forked child)."""
        return self._e != NULL and self._fork_gen == _forks

    cdef int _enter(self) except -1:
        """Mark a nogil call as started; raise ClosedError on a closed engine."""
        if self._e == NULL or self._closing:
            raise error(c.COC_ECLOSED, f"engine of endpoint {self.self_id} is closed")
        if self._fork_gen != _forks:
            raise error(
                c.COC_ECLOSED, f"engine of endpoint {self.self_id} belongs to process {self._pid}")
        self._busy += 1
        return 0

    cdef c.coc_engine *_handle(self) except NULL:
        self._enter()
        self._busy -= 1
        return self._e

    @property
    def closed(self):
        """True once :meth:`close` has run."""
        return self._e == NULL

    @property
    def address(self):
        """The contact addresses peers pass to :meth:`add_peer` (space separated)."""
        cdef char buf[4096]
        check(c.coc_engine_address(self._handle(), buf, sizeof(buf)), "engine address")
        return buf.decode()

    def add_peer(self, id, address):
        """Tell the engine how to reach endpoint ``id`` (its :attr:`address`)."""
        cdef bytes a = address.encode()
        check(c.coc_engine_add_peer(self._handle(), id, a), f"add peer {id}")
        self._addresses[id] = address

    def set_route(self, dest, hops, weights=None, size_class=None):
        """Route traffic for ``dest`` through next ``hops`` (``dest`` itself: directly).

        Several hops share load in proportion to ``weights`` (default equal).
        ``size_class`` is ``"small"`` (eager messages and every envelope: one hop per
        (source, destination) pair, so messages stay in order), ``"large"`` (the bytes of
        rendezvous messages, striped fragment by fragment over all hops) or ``None``
        (both). A destination's first route serves both classes until the other is set.
        """
        hops = list(hops)
        weights = [1] * len(hops) if weights is None else list(weights)
        if not hops or len(weights) != len(hops):
            raise ValueError(f"route to {dest}: need one or more hops and one weight per hop, "
                             f"got hops={hops!r} weights={weights!r}")
        if size_class not in _SIZE_CLASSES:
            raise ValueError(f"route to {dest}: size_class must be one of "
                             f"{sorted(k for k in _SIZE_CLASSES if k)} or None, "
                             f"not {size_class!r}")
        cdef int cls = _SIZE_CLASSES[size_class]
        cdef size_t n = len(hops), i
        cdef uint32_t *buf = <uint32_t *>malloc(2 * n * sizeof(uint32_t))
        if buf == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                buf[i] = hops[i]
                buf[n + i] = weights[i]
            if cls < 0:
                rc = c.coc_engine_set_route(self._handle(), dest, buf, buf + n, n)
            else:
                rc = c.coc_engine_set_route_class(self._handle(), dest, cls, buf, buf + n, n)
            check(rc, f"route to {dest} via {hops}")
        finally:
            free(buf)

    def connect(self, hop):
        """Connect to next hop ``hop`` now, not at the first message, so a loss is noticed.

        A gateway only sees an endpoint die through a connection: connecting every endpoint
        to its gateways at start lets them report the loss to everyone they route for.
        """
        check(c.coc_engine_connect(self._handle(), hop), f"connect to {hop}")

    def connected(self, id):
        """Return True when an authenticated connection to endpoint ``id`` is open.

        Either end may have made it: an endpoint that accepted a connection sends back on it.
        """
        return check(c.coc_engine_peer_connected(self._handle(), id), f"peer {id}") == 1

    def set_peer_delay(self, id, seconds):
        """Delay every frame sent to peer ``id`` by ``seconds`` (0 turns it off)."""
        check(c.coc_engine_set_peer_delay(self._handle(), id, <uint64_t>(seconds * 1e9)),
              f"delay to peer {id}")

    def set_peer_wire(self, id, encrypt=False, compress="none"):
        """Carry connections dialed to peer ``id`` from now on in records: encrypted
        (AES-256-GCM) when ``encrypt``, compressed with ``compress`` (``"zstd"``, ``"lz4"``
        or ``"none"``; adaptive: incompressible data goes raw). For WAN hops the topology
        marks (docs/wire-protocol.md, "Record layer"); same-host links never use it.
        """
        codecs = {"none": 0, "zstd": c.COC_WIRE_ZSTD, "lz4": c.COC_WIRE_LZ4}
        if compress not in codecs:
            raise ValueError(f"peer {id}: compress must be one of {sorted(codecs)}, "
                             f"not {compress!r}")
        flags = codecs[compress] | (c.COC_WIRE_ENCRYPT if encrypt else 0)
        check(c.coc_engine_set_peer_wire(self._handle(), id, flags), f"record layer to peer {id}")

    def fileno(self):
        """Return an fd that becomes readable when a request completes (for add_reader)."""
        return check(c.coc_engine_fd(self._handle()), "engine fd")

    def drain(self):
        """Reset :meth:`fileno` after it fired; then test the requests of interest."""
        return check(c.coc_engine_drain_fd(self._handle()), "drain engine fd")

    cdef int _post_view(self, EngineRequest req, bint is_send, int peer, int tag,
                        unsigned int context) except -1:
        """Post ``req``, whose buffer the caller exported into ``req._view``, as a send to
        or a receive from endpoint ``peer``; track it. The request releases the view on
        errors (as when it is dropped). Posting never blocks: the GIL stays."""
        cdef int rc
        req._has_view = True
        req._size = req._view.len
        req._engine, req._is_send, req._peer, req._tag = self, is_send, peer, tag
        req._context = context
        self._enter()
        if is_send:
            rc = c.coc_isend(self._e, peer, context, tag, req._view.buf, req._view.len,
                             &req._r)
        else:
            rc = c.coc_irecv(self._e, peer, context, tag, req._view.buf, req._view.len,
                             &req._r)
        self._posted(req, rc)
        return 0

    cdef EngineRequest _posted(self, EngineRequest req, int rc):
        """Finish posting ``req`` after its nogil C call returned ``rc``; return it tracked."""
        self._busy -= 1
        if rc < 0:
            req._release()
            if rc == c.COC_ETIMEDOUT:     # posting waits on nothing but a dial (conn.c)
                address = self._addresses.get(req._peer)
                where = (f"endpoint {req._peer} at {address}" if address is not None
                         else f"the next hop towards endpoint {req._peer}")
                raise error(rc, f"{req._what()}: cannot connect to {where}: its listen "
                            "backlog stayed full (it accepts no connections)")
            check(rc, req._what())
        self._track(req)
        return req

    cdef void _track(self, EngineRequest req) except *:
        """Keep ``req`` alive until complete; now and then forget completed ones.

        A sweep polls every pending request, so that those completed but never waited
        for (dropped by their caller) let go of their buffers. A sweep that finds most
        of them still in flight was wasted (a program with many requests out, as a
        window of non-blocking receives, polls each one for nothing): the next sweeps
        then wait for twice as many (``_sweep_floor``).
        """
        cdef Py_ssize_t before, after
        self._pending.add(req)
        before = len(self._pending)
        if before >= self._sweep_at:
            for r in list(self._pending):
                (<EngineRequest>r)._poll()
            after = len(self._pending)
            if 2 * after > before and self._sweep_floor < (1 << 20):
                self._sweep_floor *= 2
            self._sweep_at = max(self._sweep_floor, 2 * after)

    def isend(self, buf, dest, tag=0, context=0):
        """Start sending the bytes of ``buf`` (any contiguous buffer) to endpoint ``dest``.

        ``buf`` must not change until the request completes; it is not copied here.
        """
        cdef EngineRequest req = EngineRequest.__new__(EngineRequest)
        cdef uint32_t d = dest, ctx = context     # (unsigned: a negative one is refused)
        PyObject_GetBuffer(buf, &req._view, PyBUF_ANY_CONTIGUOUS)
        self._post_view(req, True, dest, tag, ctx)
        return req

    cdef EngineRequest _adopt(self, c.coc_request *r, Py_buffer *view, bint is_send, int peer,
                        int tag, unsigned int context, bint alloc):
        """Wrap C request ``r`` (and the export ``view``, if any) in a tracked EngineRequest."""
        cdef EngineRequest req = EngineRequest.__new__(EngineRequest)
        req._r = r
        if view != NULL:
            req._view = view[0]
            req._has_view = True
            req._size = view.len
        req._engine, req._is_send, req._peer, req._tag = self, is_send, peer, tag
        req._context, req._alloc = context, alloc
        self._track(req)
        return req

    cdef int _open_check(self) except -1:
        """Raise ClosedError unless this process may post on the engine now."""
        self._enter()
        self._busy -= 1
        return 0

    cdef EngineRequest _isend_view(self, Py_buffer *view, int dest, int tag,
                                   unsigned int context):
        """Start sending the exported buffer ``view`` to endpoint ``dest``; return None
        when the send completed at once (``view`` released), else the tracked request that
        holds ``view`` until it completes. ``view`` is released on errors too."""
        cdef c.coc_request *r = NULL
        cdef int rc
        try:
            self._open_check()
        except BaseException:
            PyBuffer_Release(view)
            raise
        rc = c.coc_isend_or_done(self._e, dest, context, tag, view.buf, view.len, &r)
        if rc < 0:
            PyBuffer_Release(view)
            check(rc, f"send to endpoint {dest} (tag {tag})")
        if r == NULL:   # complete at once, its request released
            PyBuffer_Release(view)
            return None
        return self._adopt(r, view, True, dest, tag, context, False)

    cdef bint _wait_slice(self, c.coc_request *r, c.coc_status *st) except -1:
        """Wait for ``r`` one slice (the GIL released) before it is made an
        :class:`EngineRequest`: True when it completed without error (``st`` filled; the
        caller frees it). A blocking receive that its message completes within the slice,
        as a ping-pong's does, so costs no EngineRequest (an object allocated, tracked in
        ``_pending`` and dropped per message); otherwise (the slice ran out, an error, a
        signal to look at) the caller adopts ``r`` and waits as before. The GIL is held
        from the end of the slice until the caller has freed ``r``: :meth:`close`, which
        waits for ``_busy`` to fall, frees no request meanwhile."""
        cdef int rc
        self._enter()
        with nogil:
            rc = c.coc_wait(r, SLICE_NS, st)
        self._busy -= 1
        return rc == 0 and st.error == 0

    cdef int _send_view(self, Py_buffer *view, int dest, int tag,
                        unsigned int context) except -1:
        """Send ``view`` as :meth:`_isend_view` does; return once it may change."""
        cdef EngineRequest req = self._isend_view(view, dest, tag, context)
        if req is not None:
            req._block(None)
            req._check()
        return 0

    cdef int _recv_view(self, Py_buffer *view, int source, int tag, unsigned int context,
                        c.coc_status *st) except -1:
        """Receive into the exported, writable buffer ``view`` (released here); fill ``st``."""
        cdef c.coc_request *r = NULL
        cdef int rc
        try:
            self._open_check()
        except BaseException:
            PyBuffer_Release(view)
            raise
        rc = c.coc_irecv(self._e, source, context, tag, view.buf, view.len, &r)
        if rc < 0:
            PyBuffer_Release(view)
            check(rc, "receive")
        if c.coc_wait(r, 0, st) == 0 and st.error == 0 or self._wait_slice(r, st):
            c.coc_request_free(r)
            PyBuffer_Release(view)
            return 0
        self._adopt(r, view, False, source, tag, context, False)._wait_into(st)
        return 0

    cdef Message _recv_alloc_now(self, int source, int tag, unsigned int context,
                                 object max, c.coc_status *st):
        """Receive a message of any size (irecv_alloc + wait) into engine memory; fill ``st``."""
        cdef c.coc_request *r = NULL
        cdef size_t cap = <size_t>-1 if max is None else max
        cdef Message m
        cdef EngineRequest req
        cdef int rc
        self._open_check()
        rc = c.coc_irecv_alloc(self._e, source, context, tag, cap, &r)
        check(rc, "receive")
        if c.coc_wait(r, 0, st) == 0 and st.error == 0 or self._wait_slice(r, st):
            m = _take_message(r)
            c.coc_request_free(r)
            return m
        req = self._adopt(r, NULL, False, source, tag, context, True)
        req._size = 0 if max is None else max  # pending(): 0 = any size
        req._wait_into(st)
        return req._message

    cdef Message _sendrecv_views(self, Py_buffer *out, int dest, int sendtag,
                                 Py_buffer *into, int source, int recvtag,
                                 unsigned int context, c.coc_status *st):
        """Post a receive (into ``into``, or of any size into engine memory when it is
        NULL), then send ``out``, then wait for both; fill ``st`` with the receive's status
        and return its :class:`Message` (None with ``into``). Both views are released here.

        A send that fails leaves the receive posted and tracked (as ``irecv`` + ``send``).
        """
        cdef c.coc_request *rr = NULL
        cdef EngineRequest rreq = None, sreq = None
        cdef Message m = None
        cdef int rc
        try:
            self._open_check()
        except BaseException:
            PyBuffer_Release(out)
            if into != NULL:
                PyBuffer_Release(into)
            raise
        if into != NULL:
            rc = c.coc_irecv(self._e, source, context, recvtag, into.buf, into.len, &rr)
        else:
            rc = c.coc_irecv_alloc(self._e, source, context, recvtag, <size_t>-1, &rr)
        if rc < 0:
            PyBuffer_Release(out)
            if into != NULL:
                PyBuffer_Release(into)
            check(rc, "receive")
        try:
            sreq = self._isend_view(out, dest, sendtag, context)
        finally:  # the receive is looked at and, if not complete, tracked even when the send failed
            if c.coc_wait(rr, 0, st) == 0 and st.error == 0:
                if into == NULL:
                    m = _take_message(rr)
                else:
                    PyBuffer_Release(into)
                c.coc_request_free(rr)
            else:
                rreq = self._adopt(rr, into, False, source, recvtag, context, into == NULL)
        if sreq is not None:
            sreq._block(None)
            sreq._check()
        if rreq is not None:
            rreq._wait_into(st)
            m = rreq._message
        return m

    # Blocking point-to-point: post, look once, and only when the operation is not complete
    # at once make a EngineRequest and wait (GIL released). Posting never blocks (the engine
    # takes its lock for a moment), so it keeps the GIL: a small message that is written,
    # copied or already here costs no EngineRequest, no EngineStatus of its own and no GIL switch.

    def send(self, buf, dest, tag=0, context=0):
        """Send ``buf`` to endpoint ``dest``; return once ``buf`` may change (isend + wait)."""
        cdef Py_buffer view
        self._open_check()
        PyObject_GetBuffer(buf, &view, PyBUF_ANY_CONTIGUOUS)
        self._send_view(&view, dest, tag, context)

    def recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, context=0):
        """Receive into ``buf`` (irecv + wait); return the :class:`EngineStatus`."""
        cdef Py_buffer view
        cdef c.coc_status st
        self._open_check()
        PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        self._recv_view(&view, source, tag, context, &st)
        return _status(&st)

    def recv_alloc(self, source=ANY_SOURCE, tag=ANY_TAG, context=0, max=None):
        """Receive a message of any size (irecv_alloc + wait); return ``(EngineStatus, Message)``."""
        cdef c.coc_status st
        m = self._recv_alloc_now(source, tag, context, max, &st)
        return _status(&st), m

    def isendv(self, bufs, dest, tag=0, context=0):
        """Send the buffers ``bufs`` (a sequence of contiguous buffers) as ONE message.

        The receiver sees one message holding their bytes in order. No buffer may change
        until the request completes; small messages are joined into one copy by the engine,
        large ones stream from the buffers themselves.
        """
        cdef Py_ssize_t n = len(bufs), i
        cdef c.coc_iovec *iov
        cdef EngineRequest req
        cdef uint32_t d = dest, ctx = context
        cdef int32_t t = tag
        cdef int rc
        if n > c.COC_IOV_MAX:
            raise ValueError(f"isendv to endpoint {dest}: {n} buffers, more than "
                             f"{c.COC_IOV_MAX}")
        req = EngineRequest.__new__(EngineRequest)
        req._engine, req._is_send, req._peer, req._tag = self, True, dest, tag
        req._context = context
        req._views = <Py_buffer *>malloc(max(n, 1) * sizeof(Py_buffer))
        iov = <c.coc_iovec *>malloc(max(n, 1) * sizeof(c.coc_iovec))
        if req._views == NULL or iov == NULL:
            free(iov)
            raise MemoryError()
        try:
            for i in range(n):
                PyObject_GetBuffer(bufs[i], &req._views[i], PyBUF_ANY_CONTIGUOUS)
                req._nviews = i + 1
                iov[i].base = req._views[i].buf
                iov[i].len = req._views[i].len
                req._size += req._views[i].len
            self._enter()
            rc = c.coc_isendv(self._e, d, ctx, t, iov, n, &req._r)
        except BaseException:
            req._release()
            raise
        finally:
            free(iov)
        return self._posted(req, rc)

    def irecv_alloc(self, source=ANY_SOURCE, tag=ANY_TAG, context=0, max=None):
        """Post a receive whose buffer the engine allocates, of the message's exact size.

        After completion :meth:`EngineRequest.message` returns the bytes (a :class:`Message`,
        no copy). A message above ``max`` bytes (None: no limit) is truncated to its first
        ``max`` bytes and raises :class:`coc.errors.TruncationError`.
        """
        cdef EngineRequest req = EngineRequest.__new__(EngineRequest)
        cdef uint32_t ctx = context
        self._post_alloc(req, source, tag, ctx, max)
        return req

    cdef int _post_alloc(self, EngineRequest req, int source, int tag, unsigned int context,
                         object max) except -1:
        """Post ``req`` as a receive of any size (up to ``max`` bytes, None: no limit) into
        memory the engine allocates; track it."""
        cdef size_t cap = <size_t>-1 if max is None else max
        cdef int rc
        req._engine, req._is_send, req._peer, req._tag = self, False, source, tag
        req._context, req._alloc = context, True
        req._size = 0 if max is None else max  # pending(): 0 = any size
        self._enter()
        rc = c.coc_irecv_alloc(self._e, source, context, tag, cap, &req._r)
        self._posted(req, rc)
        return 0

    def irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, context=0):
        """Post a receive into ``buf`` (writable, C-contiguous), filled in place."""
        cdef EngineRequest req = EngineRequest.__new__(EngineRequest)
        cdef uint32_t ctx = context
        PyObject_GetBuffer(buf, &req._view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        self._post_view(req, False, source, tag, ctx)
        return req

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, context=0):
        """Return the :class:`EngineStatus` of a matching message not yet received, or None."""
        cdef c.coc_status st
        rc = check(c.coc_iprobe(self._handle(), source, context, tag, &st), "iprobe")
        return _status(&st) if rc == 1 else None

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, context=0, timeout=None):
        """Block until a matching message has arrived and return its :class:`EngineStatus`.

        Raises :class:`coc.errors.CocTimeoutError` after ``timeout`` seconds.
        """
        cdef c.coc_status st
        cdef int rc
        cdef int64_t ns
        cdef int32_t s = source, t = tag
        cdef uint32_t ctx = context
        cdef int64_t deadline = _deadline(timeout)
        while True:
            ns = _slice_ns(deadline)
            self._enter()
            with nogil:
                rc = c.coc_probe(self._e, s, ctx, t, ns, &st)
            self._busy -= 1
            if rc >= 0:
                return _status(&st)
            if rc != c.COC_ETIMEDOUT:
                check(rc, "probe")
            PyErr_CheckSignals()
            if deadline >= 0 and _now_ns() >= deadline:
                raise error(c.COC_ETIMEDOUT, f"probe: no matching message after {timeout} s")

    def pending(self):
        """Return the operations not complete yet, oldest first, as dicts.

        Each has ``op`` ("send" or "recv"), ``peer`` (destination, or requested source:
        -1 for any), ``tag`` (-1 for any), ``context`` and ``size`` (bytes of the buffer).
        For coc-run's watchdog: what this endpoint waits for when a job stops moving.
        """
        ops = []
        for r in list(self._pending):
            req = <EngineRequest>r
            if self._e == NULL or req._poll():
                continue
            ops.append({"op": "send" if req._is_send else "recv", "peer": req._peer,
                        "tag": req._tag, "context": req._context, "size": req._size})
        return ops

    def peer_exited(self, id, settle=1.0):
        """Note that endpoint ``id`` has exited: from ``settle`` seconds on, a receive
        naming it as source that has not matched fails with :class:`coc.errors.PeerExited`
        instead of waiting forever.

        ``settle`` lets a message the peer sent before exiting, still on its way through
        gateways, match first. Receives from any source are not affected.
        """
        self._exited[int(id)] = _now_ns() + <int64_t>(settle * 1e9)

    def stats(self):
        """Return the engine's counters (frames, bytes, connections, buffered bytes)."""
        cdef c.coc_stats st
        check(c.coc_engine_stats(self._handle(), &st), "engine stats")
        return st

    def take_log(self):
        """Return the engine's recent log lines, oldest first, and forget them."""
        cdef char buf[65536]
        cdef c.coc_engine *e = self._handle()
        cdef int n
        lines = []
        while True:
            n = check(c.coc_engine_take_log(e, buf, sizeof(buf)), "engine log")
            lines.extend(buf[:n].decode(errors="replace").splitlines())
            if n < <int>sizeof(buf) // 2:
                return lines

    def close(self):
        """Close every connection and stop the engine; pending requests fail with ClosedError.

        Idempotent. In a forked child it only forgets the parent's engine.
        """
        cdef c.coc_engine *e = self._e
        cdef int rc = 0
        if e == NULL:
            return
        if self._fork_gen != _forks:
            self._e = NULL
            for r in self._pending:
                (<EngineRequest>r)._orphan(c.COC_ECLOSED)
            self._pending.clear()
            return
        self._closing = True
        while self._busy:  # let waits in other threads finish their slice
            time.sleep(0.005)
        for r in list(self._pending):
            (<EngineRequest>r)._poll()
        self._e = NULL
        with nogil:
            rc = c.coc_engine_close(e)
        for r in self._pending:
            (<EngineRequest>r)._orphan(c.COC_ECLOSED)
        self._pending.clear()
        check(rc, f"close engine of endpoint {self.self_id}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._owned():
            warnings.warn(f"unclosed {self!r}", ResourceWarning, source=self)
            self.close()

    def __dealloc__(self):
        if self._owned():
            c.coc_engine_close(self._e)
        self._e = NULL

    def __repr__(self):
        state = "closed" if self._e == NULL else f"{len(self._pending)} pending"
        return f"<coc._engine.Engine endpoint {self.self_id} {state}>"


include "_counters.pxi"
include "_plain.pxi"
include "_plain_read.pxi"
include "_direct.pxi"
include "_request.pxi"
