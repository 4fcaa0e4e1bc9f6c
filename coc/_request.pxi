# _request.pxi: included by _engine.pyx after _direct.pxi. A communicator's non-blocking
# point-to-point (a buffer, or an object in one message) as one object over the engine
# request (issue 17), and waits over lists of requests in one call.

@cython.final
@cython.no_gc_clear
cdef class BufferRequest(EngineRequest):
    """A communicator's ``Isend``/``Irecv`` of a buffer or ``isend``/``irecv`` of an object
    (what :class:`Direct`'s methods of those names return): ``coc.comm.request.Request``'s
    methods on the engine request itself; an object's receive returns the object.

    The general path makes a ``Single`` (Python) around an :class:`EngineRequest`; this is
    the same operation with no second object and no Python frame: ``Wait`` looks once
    with the GIL held and releases it only to block, a receive's status names the
    communicator's rank, engine errors are raised naming ranks (the communicator's
    ``translate``), ``cancel`` completes a receive as cancelled (status ``cancelled``, no
    error). tests/comm/test_fast_path.py runs both paths side by side.
    """
    cdef Direct _owner
    cdef bint _cancelled
    cdef bint _object       # an object's receive (irecv): waits return the object
    cdef bint _decoded
    cdef object _value      # the received object, once decoded
    cdef object _failure    # what decoding it raised (raised again at every wait)

    cdef int _settle(self, object status, object timeout) except -1:
        """Wait until complete (``timeout`` seconds); fill ``status`` (receives), raise
        the operation's error naming ranks (or the object's decoding error)."""
        if self._cancelled:
            if status is not None:
                self._owner._fill_cancelled(status)
            return 0
        if not self._look():
            self._block(timeout)
        try:
            self._check()
        except (_errors.TruncationError, _errors.PeerLost) as exc:
            raise self._owner._failed(exc) from None
        if self._object:
            self._decode()
            if self._failure is not None:
                raise self._failure
        if status is not None and not self._is_send:
            self._owner._fill(status, &self._st)
        return 0

    cdef int _decode(self) except -1:
        """Decode a received object once: its value, or the error decoding raised."""
        if not self._decoded:
            self._decoded = True
            try:
                self._value = self._owner._object(self._message, &self._st)
            except Exception as exc:  # kept, and raised by every wait as the general path does
                self._failure = exc
            self._message = None
        return 0

    cdef bint _ready(self) except -1:
        """True once complete (cancelled or not), without blocking."""
        return self._cancelled or self._poll()

    def wait(self, status=None, timeout=None):
        """Block until complete; fill ``status``; return the received object (None for
        sends and buffers)."""
        self._settle(status, timeout)
        return self._value

    def Wait(self, status=None, timeout=None):
        """Block until complete; fill ``status``; return True."""
        self._settle(status, timeout)
        return True

    def test(self, status=None):
        """Return ``(True, object)`` once complete (filling ``status``), else
        ``(False, None)``."""
        if self._ready():
            self._settle(status, None)
            return True, self._value
        return False, None

    def Test(self, status=None):
        """Return True once complete (filling ``status``), else False."""
        if self._ready():
            self._settle(status, None)
            return True
        return False

    def get_status(self, status=None):
        """Return True once complete, filling ``status`` (a receive that succeeded, or was
        cancelled); raises nothing and consumes nothing."""
        if not self._ready():
            return False
        if status is not None:
            if self._cancelled:
                self._owner._fill_cancelled(status)
            elif not self._is_send and self._error == 0 and not self._peer_exited:
                if self._object:
                    self._decode()
                if self._failure is None:
                    self._owner._fill(status, &self._st)
        return True

    def Get_status(self, status=None):
        """:meth:`get_status`."""
        return self.get_status(status)

    def cancel(self):
        """Cancel a receive that has not matched yet; it then completes as cancelled."""
        cdef int rc
        if self._complete or self._r == NULL:
            return False
        rc = c.coc_cancel(self._r)
        if rc == c.COC_EINVAL:
            return False
        check(rc, self._what())
        self._cancelled = True
        self._poll()                        # the engine completed it: free it now
        return True

    def Cancel(self):
        """:meth:`cancel`."""
        return self.cancel()

    def Free(self):
        """Forget the request (the engine still completes it)."""

    def _progress(self):
        """Advance without blocking; True once complete (``coc.comm.request``'s name)."""
        return self._ready()

    @property
    def _comm(self):
        return self._owner._comm

    def _engine_fd(self):
        return self._owner._world.port.fileno()

    def __await__(self):
        return self._owner._awaiting(self)

    def __repr__(self):
        state = "done" if self._complete else "pending"
        what = "send" if self._is_send else "receive"
        return f"<coc.Request {what} of {self._size} bytes, {state}>"


def wait_all(requests, statuses=None):
    """``coc.comm.request.waitall`` in one call: wait for every request (``statuses[i]``
    filled for request ``i``) and return the list of their results. A
    :class:`BufferRequest` is waited for here; any other request by its ``wait``."""
    cdef list reqs = requests if type(requests) is list else list(requests)
    cdef Py_ssize_t i, n = len(reqs)
    cdef list results = [None] * n
    for i in range(n):
        r = reqs[i]
        if type(r) is BufferRequest:
            (<BufferRequest>r)._settle(None if statuses is None else statuses[i], None)
            results[i] = (<BufferRequest>r)._value
        elif statuses is None:
            results[i] = r.wait()
        else:
            results[i] = r.wait(statuses[i])
    return results


def test_all(requests, statuses=None):
    """``coc.comm.request.testall`` in one call: ``(True, results)`` when every request
    is complete (then as :func:`wait_all`), else ``(False, None)``."""
    cdef list reqs = requests if type(requests) is list else list(requests)
    for r in reqs:
        if type(r) is BufferRequest:
            if not (<BufferRequest>r)._ready():
                return False, None
        elif not r._progress():
            return False, None
    return True, wait_all(reqs, statuses)
