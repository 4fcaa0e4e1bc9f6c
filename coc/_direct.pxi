# _direct.pxi: included by _engine.pyx (one extension module, so Direct calls the Engine's
# cdef helpers directly). A communicator's blocking point-to-point in one C call each (issue
# 17): kept apart from the engine's own wrapper classes above it.

cdef extern from "Python.h":
    long PyLong_AsLongAndOverflow(object value, int *overflow) except? -1


cdef inline bint _int_in(object value, long low, long high, long *out) except -1:
    """Store ``value`` in ``out`` and return True when it is an ``int`` in low..high
    (anything else goes to the general path, which says what is wrong with it). An int
    beyond a C long says so by ``overflow``, not an exception: no try block per argument,
    whose saved and restored exception state cost ~35 instructions each (callgrind)."""
    cdef int overflow = 0
    if type(value) is not int:
        return False
    out[0] = PyLong_AsLongAndOverflow(value, &overflow)
    return not overflow and low <= out[0] <= high


cdef inline bint _exported(object buf, Py_buffer *view, int flags):
    """Export ``buf``'s buffer into ``view``; False (no error left set) when it has none
    of that kind (the general path then says what is wrong with it)."""
    try:
        PyObject_GetBuffer(buf, view, flags)
    except Exception:
        return False
    return True


# NumPy's array object up to its flags (PyArrayObject_fields in numpy/ndarraytypes.h, the
# same from NumPy 1.7 to 2.x). An ndarray has no releasebuffer: an export of one is a
# reference to it plus its bytes' address and size, which Direct makes itself from these
# fields (_array_view). numpy's own export (its buffer info made, compared with the one
# cached on the array, freed) cost ~250 instructions per Send or Recv (callgrind).
cdef struct _NpArray:
    PyObject ob_base
    char *data
    int nd
    Py_ssize_t *dimensions
    Py_ssize_t *strides
    PyObject *base
    PyObject *descr
    int flags

cdef enum:
    NPY_ARRAY_C_CONTIGUOUS = 0x0001
    NPY_ARRAY_WRITEABLE = 0x0400
    NPY_ARRAY_WARN_ON_WRITE = 1 << 31     # numpy's own export warns before a write

cdef extern from "Python.h":
    ctypedef struct PyBufferProcs:
        void *bf_releasebuffer
    ctypedef struct _TypeBuffer "PyTypeObject":
        PyBufferProcs *tp_as_buffer


cdef dict _array_layout_ok = {}   # {ndarray type: whether _array_view may read it}


cdef bint _array_layout(type ndarray) except -1:
    """True when ``ndarray`` (numpy's) is what _array_view assumes: no releasebuffer, and
    _NpArray's fields where a sample array's address, shape and flags are. Otherwise
    (a NumPy that changed them) every array takes numpy's own export."""
    cdef _NpArray *a
    known = _array_layout_ok.get(ndarray)
    if known is None:
        sample = ndarray((3, 5), "int16")
        a = <_NpArray *><PyObject *>sample
        known = ((<_TypeBuffer *>ndarray).tp_as_buffer.bf_releasebuffer == NULL
                 and <size_t>a.data == sample.__array_interface__["data"][0]
                 and a.nd == 2 and a.dimensions[0] == 3 and a.dimensions[1] == 5
                 and a.flags & NPY_ARRAY_C_CONTIGUOUS
                 and a.descr == <PyObject *>sample.dtype)
        _array_layout_ok[ndarray] = known
    return known


@cython.final
cdef class Direct:
    """A communicator's blocking point-to-point, each call one C function of the binding.

    ``Send``, ``Recv``, ``send``, ``recv``, ``Sendrecv`` and ``sendrecv`` take the
    communicator's own arguments and do what its methods do when every peer is reached
    through the engine: check the ranks and tag, post, wait (the GIL released only when
    the operation is not complete at once), count the message, fill ``status``. No Python
    frame runs between the caller and the engine, no request or status object is made for
    an operation that completes at once. Anything else (``PROC_NULL``, a rank or tag out of
    range, a buffer that is not C-contiguous or a list like ``[buf, count, dtype]``, an
    object holding a large buffer, a message that is not a plain pickle) goes to the
    communicator's class method, the general path, which gives the same result or error.

    ``hooks`` holds what the communicator's modules define (the binding imports none of
    them): ``translate(comm, exc)`` (engine errors naming ranks), ``Status``, ``decode``
    (``decode(comm, message, status)``: any object message), ``protocol`` and ``inband``
    (an object's pickle is ``pickle.dumps(obj, protocol, buffer_callback=inband)``, which
    raises ``OutOfBand`` for one that holds a large buffer), ``OutOfBand``, ``unpickler``
    (a dict whose ``"mode"`` is ``"default"`` when received pickles are plain ones), and
    ``OBJ``/``BUF`` (the context slots of objects and buffers), ``await`` (``await`` of
    a request: its ``__await__``).

    ``Isend`` and ``Irecv`` (the non-blocking ones) return a :class:`BufferRequest`.
    """
    cdef Engine _engine
    cdef object _comm
    cdef object _cls
    cdef object _world
    cdef Counters _counters
    cdef tuple _ranks
    cdef dict _of_world
    cdef long _size
    cdef unsigned int _obj_ctx
    cdef unsigned int _buf_ctx
    cdef unsigned int _context
    cdef object _translate
    cdef object _status_type
    cdef object _decode
    cdef object _pickle_dumps
    cdef object _protocol
    cdef object _inband
    cdef object _out_of_band
    cdef bytearray _foreign     # per world rank: 1 when it runs on another site (World's)
    cdef dict _unpickler
    cdef object _loads
    cdef object _awaiting
    cdef type _ndarray          # numpy.ndarray (hooks) whose bytes _array_view reads, or None
    cdef object _descr          # the dtype _itemsize is of
    cdef Py_ssize_t _itemsize

    def __init__(self, Engine engine, comm, dict hooks):
        import pickle
        self._engine, self._comm, self._cls = engine, comm, type(comm)
        self._world = comm._world
        self._counters = comm._world.counters
        self._foreign = comm._world.foreign
        self._ranks = tuple(comm._ranks)
        self._of_world = comm._of_world
        self._size = len(self._ranks)
        self._context = comm._context
        self._obj_ctx = comm._context + hooks["OBJ"]
        self._buf_ctx = comm._context + hooks["BUF"]
        self._translate, self._status_type = hooks["translate"], hooks["Status"]
        self._decode = hooks["decode"]
        self._pickle_dumps, self._protocol = pickle.dumps, hooks["protocol"]
        self._inband = hooks["inband"]
        self._out_of_band, self._unpickler = hooks["OutOfBand"], hooks["unpickler"]
        self._loads = pickle.loads
        self._awaiting = hooks["await"]
        self._ndarray = hooks["ndarray"] if _array_layout(hooks["ndarray"]) else None

    cdef int _count(self, int target, Py_ssize_t nbytes) except -1:
        """Count one message to world rank ``target`` as ``World.count`` does, without its
        Python frame (tests/comm/test_fast_path.py checks both paths count alike).

        Whether ``target`` is on another site is read from the world's ``foreign`` bytes,
        which the world updates in place whenever its list of sites is set (``init`` sets
        it once it has learnt where every rank runs): no attribute looked up, no string
        compared per message."""
        self._counters.count(nbytes, self._foreign[target])
        return 0

    cdef bint _array_view(self, object buf, Py_buffer *view, bint writable) except -1:
        """Export ``buf``, an ``ndarray`` (exactly), into ``view`` as PyObject_GetBuffer
        does for a C-contiguous (and ``writable``) buffer, without numpy's buffer info
        (``view`` has no shape or format: the engine reads its address and size only);
        PyBuffer_Release lets go of it. False for any other array (numpy's export is for
        those: it says what they lack, or warns before a write)."""
        cdef _NpArray *a = <_NpArray *><PyObject *>buf
        cdef Py_ssize_t n
        cdef int i
        if not a.flags & NPY_ARRAY_C_CONTIGUOUS:
            return False
        if writable and (a.flags & (NPY_ARRAY_WRITEABLE | NPY_ARRAY_WARN_ON_WRITE)
                         != NPY_ARRAY_WRITEABLE):
            return False
        if a.descr != <PyObject *>self._descr:   # dtypes are immutable: their size kept
            descr = <object>a.descr
            self._itemsize = descr.itemsize
            self._descr = descr
        n = self._itemsize
        for i in range(a.nd):
            n *= a.dimensions[i]
        PyBuffer_FillInfo(view, buf, a.data, n, not a.flags & NPY_ARRAY_WRITEABLE, 0)
        return True

    cdef inline bint _view(self, object buf, Py_buffer *view, int flags):
        """Export ``buf`` into ``view`` (C-contiguous; ``flags`` PyBUF_WRITABLE or not):
        a plain ``ndarray`` by :meth:`_array_view`, anything else by its own export. False
        (no error left set) when it has no such buffer."""
        if type(buf) is self._ndarray and self._array_view(buf, view, flags & PyBUF_WRITABLE):
            return True
        return _exported(buf, view, PyBUF_C_CONTIGUOUS | flags)

    cdef object _stream(self, obj):
        """``pickling.stream(obj)``: the pickle of ``obj``, raising ``OutOfBand`` when it
        holds a large buffer. Plain data is written by :func:`_plain_dumps`; anything else
        by one vectorcall of ``pickle.dumps`` with the keyword ``buffer_callback`` named in
        a tuple made once (calling the ``functools.partial`` copies its keywords into a
        new dict at every message)."""
        cdef PyObject *args[4]
        stream = _plain_dumps(obj)
        if stream is not None:
            return stream
        args[0] = NULL
        args[1] = <PyObject *>obj
        args[2] = <PyObject *>self._protocol
        args[3] = <PyObject *>self._inband
        return PyObject_Vectorcall(self._pickle_dumps, &args[1],
                                   2 | PY_VECTORCALL_ARGUMENTS_OFFSET, _CALLBACK_KEYWORD)

    cdef int _fill(self, object status, c.coc_status *st) except -1:
        """Fill the caller's ``status`` from ``st`` (its source as a rank)."""
        source = self._of_world.get(st.source, st.source)
        if type(status) is self._status_type:
            status.source, status.tag, status.count = source, st.tag, st.count
            status.error, status.cancelled = 0, False
        else:
            status._fill(self._status_type(source, st.tag, st.count))
        return 0

    cdef int _fill_cancelled(self, object status) except -1:
        """Fill the caller's ``status`` as a cancelled receive's (``Request.cancel``)."""
        cancelled = self._status_type()
        cancelled.cancelled = True
        status._fill(cancelled)
        return 0

    cdef object _failed(self, BaseException exc):
        """The exception to raise for an engine error: ranks of the communicator named."""
        return self._translate(self._comm, exc)

    cdef object _object(self, Message m, c.coc_status *st):
        """The object in message ``m`` (None: an empty message): a plain pickle here (plain
        data by :func:`_plain_loads`, the rest by ``pickle.loads``), anything else by
        ``decode``."""
        if (m is not None and m._n and (<unsigned char *>m._p)[0] == 0x80
                and self._unpickler["mode"] == "default"):
            obj = _plain_loads(<unsigned char *>m._p, m._n)
            if obj is _NOT_PLAIN:
                return self._loads(m)
            return obj
        return self._decode(self._comm, m, _status(st))

    cdef int _send_now(self, Py_buffer *view, long dest, long tag,
                       unsigned int context) except -1:
        """Send ``view`` (released here) to rank ``dest``, count it; errors name ranks."""
        cdef int target = self._ranks[dest]
        cdef Py_ssize_t n = view.len
        try:
            self._engine._send_view(view, target, tag, context)
        except _errors.PeerLost as exc:
            raise self._failed(exc) from None
        self._count(target, n)
        return 0

    cdef Message _exchange(self, Py_buffer *out, long dest, long sendtag, Py_buffer *into,
                           long source, long recvtag, unsigned int context,
                           c.coc_status *st):
        """:meth:`Engine._sendrecv_views` between ranks: counted, errors naming ranks."""
        cdef int target = self._ranks[dest]
        cdef Py_ssize_t n = out.len
        try:
            m = self._engine._sendrecv_views(out, target, sendtag, into,
                                             self._ranks[source] if source >= 0 else source,
                                             recvtag, context, st)
        except (_errors.TruncationError, _errors.PeerLost) as exc:
            raise self._failed(exc) from None
        self._count(target, n)
        return m

    def Send(self, buf, dest, tag=0):
        """``Communicator.Send``: send the buffer ``buf`` to rank ``dest``."""
        cdef Py_buffer view
        cdef long d, t
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(tag, 0, MAX_TAG, &t)):
            return self._cls.Send(self._comm, buf, dest, tag)
        if not self._view(buf, &view, 0):
            return self._cls.Send(self._comm, buf, dest, tag)
        self._send_now(&view, d, t, self._buf_ctx)

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``Communicator.Recv``: receive into the buffer ``buf``."""
        cdef Py_buffer view
        cdef c.coc_status st
        cdef long s, t
        if not (_int_in(source, -1, self._size - 1, &s) and _int_in(tag, -1, MAX_TAG, &t)):
            return self._cls.Recv(self._comm, buf, source, tag, status)
        if not self._view(buf, &view, PyBUF_WRITABLE):
            return self._cls.Recv(self._comm, buf, source, tag, status)
        try:
            self._engine._recv_view(&view, self._ranks[s] if s >= 0 else s, t,
                                    self._buf_ctx, &st)
        except (_errors.TruncationError, _errors.PeerLost) as exc:
            raise self._failed(exc) from None
        if status is not None:
            self._fill(status, &st)

    def Isend(self, buf, dest, tag=0):
        """``Communicator.Isend``: start sending the buffer ``buf`` to rank ``dest``."""
        cdef BufferRequest req
        cdef long d, t
        cdef int target
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(tag, 0, MAX_TAG, &t)):
            return self._cls.Isend(self._comm, buf, dest, tag)
        req = BufferRequest.__new__(BufferRequest)
        if not self._view(buf, &req._view, 0):
            return self._cls.Isend(self._comm, buf, dest, tag)
        req._owner = self
        target = self._ranks[d]
        try:
            self._engine._post_view(req, True, target, t, self._buf_ctx)
        except _errors.PeerLost as exc:
            raise self._failed(exc) from None
        self._count(target, req._size)
        return req

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """``Communicator.Irecv``: start receiving into the buffer ``buf``."""
        cdef BufferRequest req
        cdef long s, t
        if not (_int_in(source, -1, self._size - 1, &s) and _int_in(tag, -1, MAX_TAG, &t)):
            return self._cls.Irecv(self._comm, buf, source, tag)
        req = BufferRequest.__new__(BufferRequest)
        if not self._view(buf, &req._view, PyBUF_WRITABLE):
            return self._cls.Irecv(self._comm, buf, source, tag)
        req._owner = self
        self._engine._post_view(req, False, self._ranks[s] if s >= 0 else s, t,
                                self._buf_ctx)
        return req

    def isend(self, obj, dest, tag=0):
        """``Communicator.isend``: start sending the object ``obj`` to rank ``dest``."""
        cdef BufferRequest req
        cdef long d, t
        cdef int target
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(tag, 0, MAX_TAG, &t)):
            return self._cls.isend(self._comm, obj, dest, tag)
        try:
            message = self._stream(obj)
        except self._out_of_band:
            return self._cls.isend(self._comm, obj, dest, tag)
        req = BufferRequest.__new__(BufferRequest)
        PyObject_GetBuffer(message, &req._view, 0)
        req._owner = self
        target = self._ranks[d]
        try:
            self._engine._post_view(req, True, target, t, self._obj_ctx)
        except _errors.PeerLost as exc:
            raise self._failed(exc) from None
        self._count(target, req._size)
        return req

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        """``Communicator.irecv``: start receiving an object; ``wait()`` returns it."""
        cdef BufferRequest req
        cdef long s, t
        if not (_int_in(source, -1, self._size - 1, &s) and _int_in(tag, -1, MAX_TAG, &t)):
            return self._cls.irecv(self._comm, buf, source, tag)
        req = BufferRequest.__new__(BufferRequest)
        req._owner, req._object = self, True
        self._engine._post_alloc(req, self._ranks[s] if s >= 0 else s, t, self._obj_ctx, None)
        return req

    def send(self, obj, dest, tag=0):
        """``Communicator.send``: send the object ``obj`` to rank ``dest``."""
        cdef Py_buffer view
        cdef long d, t
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(tag, 0, MAX_TAG, &t)):
            return self._cls.send(self._comm, obj, dest, tag)
        try:
            message = self._stream(obj)
        except self._out_of_band:
            return self._cls.send(self._comm, obj, dest, tag)
        PyObject_GetBuffer(message, &view, 0)
        self._send_now(&view, d, t, self._obj_ctx)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``Communicator.recv``: receive and return an object."""
        cdef c.coc_status st
        cdef long s, t
        cdef Message m
        if not (_int_in(source, -1, self._size - 1, &s) and _int_in(tag, -1, MAX_TAG, &t)):
            return self._cls.recv(self._comm, buf, source, tag, status)
        try:
            m = self._engine._recv_alloc_now(self._ranks[s] if s >= 0 else s, t,
                                             self._obj_ctx, None, &st)
        except _errors.PeerLost as exc:
            raise self._failed(exc) from None
        obj = self._object(m, &st)
        if status is not None:
            self._fill(status, &st)
        return obj

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """``Communicator.Sendrecv``: send ``sendbuf`` to ``dest`` and receive into
        ``recvbuf`` from ``source`` at once."""
        cdef Py_buffer out, into
        cdef c.coc_status st
        cdef long d, s, dt, rt
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(sendtag, 0, MAX_TAG, &dt)
                and _int_in(source, -1, self._size - 1, &s)
                and _int_in(recvtag, -1, MAX_TAG, &rt)):
            return self._cls.Sendrecv(self._comm, sendbuf, dest, sendtag, recvbuf, source,
                                      recvtag, status)
        if not _exported(sendbuf, &out, PyBUF_C_CONTIGUOUS):
            return self._cls.Sendrecv(self._comm, sendbuf, dest, sendtag, recvbuf, source,
                                      recvtag, status)
        if not _exported(recvbuf, &into, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE):
            PyBuffer_Release(&out)
            return self._cls.Sendrecv(self._comm, sendbuf, dest, sendtag, recvbuf, source,
                                      recvtag, status)
        self._exchange(&out, d, dt, &into, s, rt, self._buf_ctx, &st)
        if status is not None:
            self._fill(status, &st)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """``Communicator.sendrecv``: send ``sendobj`` to ``dest`` and receive an object
        from ``source`` at once."""
        cdef Py_buffer out
        cdef c.coc_status st
        cdef long d, s, dt, rt
        cdef Message m
        if not (_int_in(dest, 0, self._size - 1, &d) and _int_in(sendtag, 0, MAX_TAG, &dt)
                and _int_in(source, -1, self._size - 1, &s)
                and _int_in(recvtag, -1, MAX_TAG, &rt)):
            return self._cls.sendrecv(self._comm, sendobj, dest, sendtag, recvbuf, source,
                                      recvtag, status)
        try:
            message = self._stream(sendobj)
        except self._out_of_band:
            return self._cls.sendrecv(self._comm, sendobj, dest, sendtag, recvbuf, source,
                                      recvtag, status)
        PyObject_GetBuffer(message, &out, 0)
        m = self._exchange(&out, d, dt, NULL, s, rt, self._obj_ctx, &st)
        obj = self._object(m, &st)
        if status is not None:
            self._fill(status, &st)
        return obj

    # The messages of blocking collectives (coc.comm.collectives.base.Call): ranks of the
    # communicator, tags and context slots already checked by the caller; engine errors
    # are raised as they are (the collective's driver names ranks in them).

    def post(self, buf, int dest, int tag, unsigned int slot, list pending):
        """Start sending the C-contiguous buffer ``buf`` to rank ``dest`` on context
        ``slot`` (counted); a send not complete at once goes on the list ``pending`` as an
        :class:`EngineRequest`. Return False, having sent nothing, for another buffer."""
        cdef Py_buffer view
        cdef int target = self._ranks[dest]
        cdef Py_ssize_t n
        if not _exported(buf, &view, PyBUF_C_CONTIGUOUS):
            return False
        n = view.len
        req = self._engine._isend_view(&view, target, tag, self._context + slot)
        if req is not None:
            pending.append(req)
        self._count(target, n)
        return True

    def post_obj(self, obj, int dest, int tag, unsigned int slot, list pending):
        """Start sending object ``obj`` as :meth:`post` does; False, having sent nothing,
        when it holds a large buffer (the general path sends those)."""
        try:
            message = self._stream(obj)
        except self._out_of_band:
            return False
        return self.post(message, dest, tag, slot, pending)

    def take(self, buf, int source, int tag, unsigned int slot):
        """Receive from rank ``source`` into ``buf`` (blocking); return the message's size."""
        cdef Py_buffer view
        cdef c.coc_status st
        PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        self._engine._recv_view(&view, self._ranks[source], tag,
                                self._context + slot, &st)
        return st.count

    def take_obj(self, int source, int tag, unsigned int slot):
        """Receive an object from rank ``source`` (blocking) and return it."""
        cdef c.coc_status st
        cdef Message m = self._engine._recv_alloc_now(
            self._ranks[source], tag, self._context + slot, None, &st)
        return self._object(m, &st)
