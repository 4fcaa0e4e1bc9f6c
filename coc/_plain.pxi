# _plain.pxi: included by _engine.pyx before _plain_read.pxi and _direct.pxi: the opcodes and
# the writer (the reader is _plain_read.pxi). Small messages of plain data
# (None, bool, int, float, str, bytes and tuples, lists and dicts of them) pickled and
# unpickled by the fast path without pickle's per-call set-up (issue 17, docs/performance.md
# "Small messages from Python"). The stream is a standard pickle (protocol 5 opcodes): any
# receiver reads it with pickle.loads; the reader reads any pickle made only of the opcodes
# below (pickle.dumps's of plain data included) and hands every other one to pickle.loads.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Next
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.string cimport memcpy

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    long long PyLong_AsLongLongAndOverflow(object value, int *overflow) except? -1

cdef enum:
    PLAIN_MAX = 4096         # bytes of stream the writer makes at most (then pickle.dumps)
    PLAIN_CONTAINERS = 64    # containers it tracks (a container met twice: pickle.dumps)
    PLAIN_DONE = 1           # what _put returns: written,
    PLAIN_NOT = 0            # or not plain data (the caller calls pickle.dumps)

# pickle's opcodes that the writer writes and the reader reads (pickle.py names them).
cdef enum:
    OP_MARK = 0x28, OP_STOP = 0x2e, OP_NONE = 0x4e, OP_BININT = 0x4a, OP_BININT1 = 0x4b,
    OP_BININT2 = 0x4d, OP_BINFLOAT = 0x47, OP_BINBYTES = 0x42, OP_SHORT_BINBYTES = 0x43,
    OP_BINUNICODE = 0x58, OP_SHORT_BINUNICODE = 0x8c, OP_EMPTY_TUPLE = 0x29, OP_TUPLE = 0x74,
    OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_EMPTY_LIST = 0x5d,
    OP_APPEND = 0x61, OP_APPENDS = 0x65, OP_EMPTY_DICT = 0x7d, OP_SETITEM = 0x73,
    OP_SETITEMS = 0x75, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a,
    OP_PROTO = 0x80, OP_FRAME = 0x95, OP_MEMOIZE = 0x94, OP_BINGET = 0x68,
    OP_LONG_BINGET = 0x6a, OP_BINPUT = 0x71, OP_LONG_BINPUT = 0x72

cdef struct _Writer:
    unsigned char buf[PLAIN_MAX]
    Py_ssize_t n
    void *seen[PLAIN_CONTAINERS]
    int nseen

cdef inline bint _room(_Writer *w, Py_ssize_t k) noexcept:
    return w.n + k <= PLAIN_MAX


cdef inline void _put_u32(_Writer *w, unsigned char op, Py_ssize_t v) noexcept:
    w.buf[w.n] = op
    w.buf[w.n + 1] = v & 0xff
    w.buf[w.n + 2] = (v >> 8) & 0xff
    w.buf[w.n + 3] = (v >> 16) & 0xff
    w.buf[w.n + 4] = (v >> 24) & 0xff
    w.n += 5


cdef inline bint _first_time(_Writer *w, object container) noexcept:
    """Track ``container``; False when it was met before (pickle shares it by its memo,
    this writer has none) or too many are tracked."""
    cdef void *p = <void *>container
    cdef int i
    for i in range(w.nseen):
        if w.seen[i] == p:
            return False
    if w.nseen == PLAIN_CONTAINERS:
        return False
    w.seen[w.nseen] = p
    w.nseen += 1
    return True


cdef int _put_bytes(_Writer *w, const char *data, Py_ssize_t size, unsigned char short_op,
                    unsigned char long_op) noexcept:
    if not _room(w, size + 5):
        return PLAIN_NOT
    if size < 256:
        w.buf[w.n] = short_op
        w.buf[w.n + 1] = <unsigned char>size
        w.n += 2
    else:
        _put_u32(w, long_op, size)
    memcpy(&w.buf[w.n], data, size)
    w.n += size
    return PLAIN_DONE


cdef int _put_int(_Writer *w, object value) noexcept:
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    cdef int i
    if overflow or not _room(w, 10):
        return PLAIN_NOT
    if 0 <= v < 256:
        w.buf[w.n] = OP_BININT1
        w.buf[w.n + 1] = <unsigned char>v
        w.n += 2
    elif 0 <= v < 65536:
        w.buf[w.n] = OP_BININT2
        w.buf[w.n + 1] = v & 0xff
        w.buf[w.n + 2] = (v >> 8) & 0xff
        w.n += 3
    elif -2147483648 <= v <= 2147483647:
        _put_u32(w, OP_BININT, <Py_ssize_t>(v & 0xffffffff))
    else:   # eight bytes of two's complement, little-endian (LONG1 takes any length)
        w.buf[w.n] = OP_LONG1
        w.buf[w.n + 1] = 8
        for i in range(8):
            w.buf[w.n + 2 + i] = (<unsigned long long>v >> (8 * i)) & 0xff
        w.n += 10
    return PLAIN_DONE


cdef int _put(_Writer *w, object obj) except -1:
    """Write ``obj``; PLAIN_NOT when it is not plain data or too large (nothing raised)."""
    cdef type t = type(obj)
    cdef Py_ssize_t size, pos, i
    cdef const char *text
    cdef PyObject *key
    cdef PyObject *value
    cdef double d
    cdef uint64_t bits
    if obj is None or obj is True or obj is False:
        if not _room(w, 1):
            return PLAIN_NOT
        w.buf[w.n] = OP_NONE if obj is None else OP_NEWTRUE if obj is True else OP_NEWFALSE
        w.n += 1
        return PLAIN_DONE
    if t is int:
        return _put_int(w, obj)
    if t is float:
        if not _room(w, 9):
            return PLAIN_NOT
        d = PyFloat_AS_DOUBLE(obj)
        memcpy(&bits, &d, 8)
        w.buf[w.n] = OP_BINFLOAT
        for i in range(8):                      # big-endian IEEE 754, as pickle writes it
            w.buf[w.n + 8 - i] = (bits >> (8 * i)) & 0xff
        w.n += 9
        return PLAIN_DONE
    if t is str:
        try:
            text = PyUnicode_AsUTF8AndSize(obj, &size)
        except UnicodeEncodeError:      # lone surrogates: pickle writes them its own way
            return PLAIN_NOT
        return _put_bytes(w, text, size, OP_SHORT_BINUNICODE, OP_BINUNICODE)
    if t is bytes:
        return _put_bytes(w, PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj),
                          OP_SHORT_BINBYTES, OP_BINBYTES)
    if t is tuple:
        size = PyTuple_GET_SIZE(obj)
        if size == 0:
            if not _room(w, 1):
                return PLAIN_NOT
            w.buf[w.n] = OP_EMPTY_TUPLE
            w.n += 1
            return PLAIN_DONE
        if not _first_time(w, obj):
            return PLAIN_NOT
        if size > 3:
            if not _room(w, 1):
                return PLAIN_NOT
            w.buf[w.n] = OP_MARK
            w.n += 1
        for i in range(size):
            if _put(w, <object>PyTuple_GET_ITEM(obj, i)) != PLAIN_DONE:
                return PLAIN_NOT
        if not _room(w, 1):
            return PLAIN_NOT
        w.buf[w.n] = OP_TUPLE if size > 3 else OP_TUPLE1 + size - 1
        w.n += 1
        return PLAIN_DONE
    if t is list:
        if not (_first_time(w, obj) and _room(w, 2)):
            return PLAIN_NOT
        w.buf[w.n] = OP_EMPTY_LIST
        w.n += 1
        size = len(<list>obj)
        if size == 0:
            return PLAIN_DONE
        w.buf[w.n] = OP_MARK
        w.n += 1
        for item in <list>obj:      # no Python code runs here: the list cannot change
            if _put(w, item) != PLAIN_DONE:
                return PLAIN_NOT
        if not _room(w, 1):
            return PLAIN_NOT
        w.buf[w.n] = OP_APPENDS
        w.n += 1
        return PLAIN_DONE
    if t is dict:
        if not (_first_time(w, obj) and _room(w, 2)):
            return PLAIN_NOT
        w.buf[w.n] = OP_EMPTY_DICT
        w.n += 1
        if len(<dict>obj) == 0:
            return PLAIN_DONE
        w.buf[w.n] = OP_MARK
        w.n += 1
        pos = 0
        while PyDict_Next(obj, &pos, &key, &value):
            if _put(w, <object>key) != PLAIN_DONE or _put(w, <object>value) != PLAIN_DONE:
                return PLAIN_NOT
        if not _room(w, 1):
            return PLAIN_NOT
        w.buf[w.n] = OP_SETITEMS
        w.n += 1
        return PLAIN_DONE
    return PLAIN_NOT


cdef object _plain_dumps(object obj):
    """The pickle stream of plain data ``obj`` (at most PLAIN_MAX bytes), or None when it
    is anything else: other types (NumPy arrays, instances, subclasses), a container met
    twice (shared or recursive: pickle's memo keeps it one object), lone surrogates, an
    int beyond 64 bits. What it writes is what pickle.loads reads as ``obj``: protocol 5
    opcodes, no frame (optional) and no memo (nothing is met twice); strings equal to each
    other arrive as separate objects."""
    cdef _Writer w
    w.n = 2
    w.nseen = 0
    w.buf[0] = OP_PROTO
    w.buf[1] = 5
    if _put(&w, obj) != PLAIN_DONE or not _room(&w, 1):
        return None
    w.buf[w.n] = OP_STOP
    w.n += 1
    return PyBytes_FromStringAndSize(<char *>w.buf, w.n)


def plain_dumps(obj):
    """Return the pickle stream the fast path sends for ``obj``, or None when it would
    call ``pickle.dumps`` (not plain data, or more than 4096 bytes). For tests and
    benchmarks: ``pickle.loads(plain_dumps(obj)) == obj``."""
    return _plain_dumps(obj)
