# _plain.pxi: included by _engine.pyx before _direct.pxi. Small messages of plain data
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
    PLAIN_MARKS = 64         # open MARKs the reader holds at most
    PLAIN_DONE = 1           # what _plain_put returns: written,
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

# The reader's answer for a stream it does not read (pickle.loads reads it).
cdef object _NOT_PLAIN = object()


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


cdef inline Py_ssize_t _u32(const unsigned char *p) noexcept:
    return p[0] | (p[1] << 8) | (p[2] << 16) | (<Py_ssize_t>p[3] << 24)


cdef extern from "Python.h":
    # The reader's calls, on references it owns itself (no reference counting by Cython).
    PyObject *_new_int "PyLong_FromLong"(long value)
    PyObject *_new_long "PyLong_FromLongLong"(long long value)
    PyObject *_new_float "PyFloat_FromDouble"(double value)
    PyObject *_new_str "PyUnicode_DecodeUTF8"(const char *s, Py_ssize_t size, const char *errors)
    PyObject *_new_bytes "PyBytes_FromStringAndSize"(const char *s, Py_ssize_t size)
    PyObject *_new_dict "PyDict_New"()
    PyObject *_new_list "PyList_New"(Py_ssize_t size)
    PyObject *_new_tuple "PyTuple_New"(Py_ssize_t size)
    void _tuple_set "PyTuple_SET_ITEM"(PyObject *t, Py_ssize_t i, PyObject *item)
    int _dict_set "PyDict_SetItem"(PyObject *d, PyObject *key, PyObject *value)
    int _list_append "PyList_Append"(PyObject *l, PyObject *item)
    bint _is_dict "PyDict_CheckExact"(PyObject *o)
    bint _is_list "PyList_CheckExact"(PyObject *o)
    void _incref "Py_INCREF"(PyObject *o)
    void _decref "Py_DECREF"(PyObject *o)
    PyObject *_None "Py_None"
    PyObject *_True "Py_True"
    PyObject *_False "Py_False"
    void _clear_error "PyErr_Clear"()

cdef extern from "Python.h":
    Py_ssize_t _str_length "PyUnicode_GET_LENGTH"(PyObject *o)
    bint _str_ascii "PyUnicode_IS_ASCII"(PyObject *o)
    void *_str_data "PyUnicode_DATA"(PyObject *o)

from libc.string cimport memcmp

cdef enum:
    STR_CACHE = 128         # short ASCII strings the reader keeps (dict keys, mostly),
    STR_CACHED_MAX = 24     # of at most this many bytes

# The strings the reader made last, by a hash of their bytes: a message's keys ("step",
# "name") are the last one's, and taking the same str object again spares decoding it and
# hashing it when it becomes a key (a str's hash is kept in it). Owned references.
cdef PyObject *_strings[STR_CACHE]


cdef PyObject *_short_str(const unsigned char *s, Py_ssize_t size) noexcept:
    """A new reference to the str of the ASCII bytes ``s`` (a cached one, or one made and
    cached); the UTF-8 decoder's for anything else. NULL with an error set on failure."""
    cdef size_t h = <size_t>size
    cdef Py_ssize_t k
    cdef unsigned char ascii = 0
    cdef PyObject *o
    if size > STR_CACHED_MAX:
        return _new_str(<const char *>s, size, "surrogatepass")
    for k in range(size):
        h = h * 31 + s[k]
        ascii |= s[k]
    if ascii & 0x80:
        return _new_str(<const char *>s, size, "surrogatepass")
    h = (h ^ (h >> 7)) & (STR_CACHE - 1)
    o = _strings[h]
    if o != NULL and _str_length(o) == size and memcmp(_str_data(o), s, size) == 0:
        _incref(o)
        return o
    o = _new_str(<const char *>s, size, "surrogatepass")
    if o != NULL and _str_ascii(o):
        if _strings[h] != NULL:
            _decref(_strings[h])
        _incref(o)
        _strings[h] = o
    return o


cdef enum:
    PLAIN_STACK = 256       # objects the reader holds on its stack at most,
    PLAIN_MEMO = 256        # and in its memo (pickle.dumps memoizes every container and str)
    READ_STOP = 1           # _read: the object is in *out
    READ_NOT = 0            # not read (pickle.loads reads it)
    READ_ERROR = -1         # a Python error is set (pickle.loads raises its own)

cdef struct _Reader:
    PyObject *stack[PLAIN_STACK]
    Py_ssize_t depth
    Py_ssize_t marks[PLAIN_MARKS]
    int nmarks
    PyObject *memo[PLAIN_MEMO]
    Py_ssize_t nmemo


cdef inline int _push(_Reader *r, PyObject *o) noexcept:
    """Push the new reference ``o`` (NULL: the call that made it failed)."""
    if o == NULL:
        return READ_ERROR
    if r.depth == PLAIN_STACK:
        _decref(o)
        return READ_NOT
    r.stack[r.depth] = o
    r.depth += 1
    return READ_STOP


cdef inline int _push_borrowed(_Reader *r, PyObject *o) noexcept:
    _incref(o)
    return _push(r, o)


cdef int _collect(_Reader *r, unsigned char op, Py_ssize_t at) noexcept:
    """SETITEMS, APPENDS, SETITEM, APPEND (the container at ``at - 1``, its items from
    ``at`` on) or TUPLE (the items from ``at`` on): build, leave the result on the stack."""
    cdef Py_ssize_t k, top = r.depth
    cdef PyObject *target
    if op == OP_TUPLE:
        target = _new_tuple(top - at)
        if target == NULL:
            return READ_ERROR
        for k in range(at, top):
            _tuple_set(target, k - at, r.stack[k])      # steals the stack's reference
        r.depth = at
        return _push(r, target)
    if at == 0:
        return READ_NOT
    target = r.stack[at - 1]
    if op == OP_SETITEMS or op == OP_SETITEM:
        if not _is_dict(target) or (top - at) % 2:
            return READ_NOT
        for k in range(at, top, 2):
            if _dict_set(target, r.stack[k], r.stack[k + 1]) < 0:
                return READ_ERROR                        # an unhashable key
    else:
        if not _is_list(target):
            return READ_NOT
        for k in range(at, top):
            if _list_append(target, r.stack[k]) < 0:
                return READ_ERROR
    for k in range(at, top):
        _decref(r.stack[k])
    r.depth = at
    return READ_STOP


cdef int _read(_Reader *r, const unsigned char *p, Py_ssize_t n, PyObject **out) noexcept:
    """Run the opcodes of ``p``; READ_STOP with the object in ``out`` at STOP."""
    cdef Py_ssize_t i = 0, k, size
    cdef unsigned char op
    cdef uint64_t bits
    cdef double d
    cdef int rc
    while i < n:
        op = p[i]
        i += 1
        if op == OP_BININT1:
            if i + 1 > n:
                return READ_NOT
            rc = _push(r, _new_int(p[i]))
            i += 1
        elif op == OP_SHORT_BINUNICODE or op == OP_BINUNICODE:
            if op == OP_SHORT_BINUNICODE:
                if i + 1 > n:
                    return READ_NOT
                size = p[i]
                i += 1
            else:
                if i + 4 > n:
                    return READ_NOT
                size = _u32(&p[i])
                i += 4
            if size > n - i:
                return READ_NOT
            rc = _push(r, _short_str(&p[i], size))
            i += size
        elif op == OP_MEMOIZE:
            if r.depth == 0 or r.nmemo == PLAIN_MEMO:
                return READ_NOT
            r.memo[r.nmemo] = r.stack[r.depth - 1]
            _incref(r.memo[r.nmemo])
            r.nmemo += 1
            rc = READ_STOP
        elif op == OP_MARK:
            if r.nmarks == PLAIN_MARKS:
                return READ_NOT
            r.marks[r.nmarks] = r.depth
            r.nmarks += 1
            rc = READ_STOP
        elif op == OP_SETITEMS or op == OP_APPENDS or op == OP_TUPLE:
            if r.nmarks == 0:
                return READ_NOT
            r.nmarks -= 1
            rc = _collect(r, op, r.marks[r.nmarks])
        elif op == OP_EMPTY_DICT:
            rc = _push(r, _new_dict())
        elif op == OP_EMPTY_LIST:
            rc = _push(r, _new_list(0))
        elif op == OP_EMPTY_TUPLE:
            rc = _push(r, _new_tuple(0))
        elif op == OP_TUPLE1 or op == OP_TUPLE2 or op == OP_TUPLE3:
            size = op - OP_TUPLE1 + 1
            if r.depth < size:
                return READ_NOT
            rc = _collect(r, OP_TUPLE, r.depth - size)
        elif op == OP_SETITEM or op == OP_APPEND:
            size = 2 if op == OP_SETITEM else 1
            if r.depth < size + 1:
                return READ_NOT
            rc = _collect(r, op, r.depth - size)
        elif op == OP_BININT2:
            if i + 2 > n:
                return READ_NOT
            rc = _push(r, _new_int(p[i] | (p[i + 1] << 8)))
            i += 2
        elif op == OP_BININT:
            if i + 4 > n:
                return READ_NOT
            rc = _push(r, _new_int(<int32_t>(<uint32_t>_u32(&p[i]))))
            i += 4
        elif op == OP_LONG1:
            if i + 1 > n:
                return READ_NOT
            size = p[i]
            i += 1
            if size == 0 or size > 8 or size > n - i:
                return READ_NOT
            bits = 0
            for k in range(size):
                bits |= (<uint64_t>p[i + k]) << (8 * k)
            if size < 8 and p[i + size - 1] & 0x80:     # negative: extend the sign
                bits |= ~((<uint64_t>1 << (8 * size)) - 1)
            rc = _push(r, _new_long(<long long>bits))
            i += size
        elif op == OP_BINFLOAT:
            if i + 8 > n:
                return READ_NOT
            bits = 0
            for k in range(8):
                bits = (bits << 8) | p[i + k]
            memcpy(&d, &bits, 8)
            rc = _push(r, _new_float(d))
            i += 8
        elif op == OP_SHORT_BINBYTES or op == OP_BINBYTES:
            if op == OP_SHORT_BINBYTES:
                if i + 1 > n:
                    return READ_NOT
                size = p[i]
                i += 1
            else:
                if i + 4 > n:
                    return READ_NOT
                size = _u32(&p[i])
                i += 4
            if size > n - i:
                return READ_NOT
            rc = _push(r, _new_bytes(<const char *>&p[i], size))
            i += size
        elif op == OP_NONE:
            rc = _push_borrowed(r, _None)
        elif op == OP_NEWTRUE:
            rc = _push_borrowed(r, _True)
        elif op == OP_NEWFALSE:
            rc = _push_borrowed(r, _False)
        elif op == OP_BINGET or op == OP_LONG_BINGET:
            size = 1 if op == OP_BINGET else 4
            if i + size > n:
                return READ_NOT
            k = p[i] if op == OP_BINGET else _u32(&p[i])
            i += size
            if k >= r.nmemo:
                return READ_NOT
            rc = _push_borrowed(r, r.memo[k])
        elif op == OP_BINPUT or op == OP_LONG_BINPUT:
            size = 1 if op == OP_BINPUT else 4
            if i + size > n or r.depth == 0:
                return READ_NOT
            k = p[i] if op == OP_BINPUT else _u32(&p[i])
            i += size
            if k != r.nmemo or k == PLAIN_MEMO:     # pickle.dumps numbers them in order
                return READ_NOT
            r.memo[k] = r.stack[r.depth - 1]
            _incref(r.memo[k])
            r.nmemo += 1
            rc = READ_STOP
        elif op == OP_PROTO:
            if i + 1 > n or p[i] > 5:
                return READ_NOT
            i += 1
            rc = READ_STOP
        elif op == OP_FRAME:
            if i + 8 > n:
                return READ_NOT
            i += 8
            rc = READ_STOP
        elif op == OP_STOP:
            if r.depth == 0:
                return READ_NOT
            r.depth -= 1
            out[0] = r.stack[r.depth]
            return READ_STOP
        else:
            return READ_NOT
        if rc != READ_STOP:
            return rc
    return READ_NOT


cdef object _plain_loads(const unsigned char *p, Py_ssize_t n):
    """The object of pickle stream ``p`` (``n`` bytes) when it holds only the opcodes the
    writer writes (plus what pickle.dumps adds to plain data: FRAME, the memo, single
    APPEND/SETITEM), else ``_NOT_PLAIN``: any other opcode, a stream cut short or
    malformed, an error such as a key that cannot be hashed (pickle.loads then reads it,
    or raises its own error). What it builds is what pickle.loads builds."""
    cdef _Reader r
    cdef PyObject *found = NULL
    cdef Py_ssize_t k
    cdef int rc
    r.depth = r.nmarks = r.nmemo = 0
    rc = _read(&r, p, n, &found)
    for k in range(r.depth):
        _decref(r.stack[k])
    for k in range(r.nmemo):
        _decref(r.memo[k])
    if rc != READ_STOP:
        if rc == READ_ERROR:
            _clear_error()
        return _NOT_PLAIN
    obj = <object>found          # a new reference of its own
    _decref(found)               # (the stack's, taken over)
    return obj

def plain_dumps(obj):
    """Return the pickle stream the fast path sends for ``obj``, or None when it would
    call ``pickle.dumps`` (not plain data, or more than 4096 bytes). For tests and
    benchmarks: ``pickle.loads(plain_dumps(obj)) == obj``."""
    return _plain_dumps(obj)


def plain_loads(buf):
    """Return the object of pickle stream ``buf`` as the fast path reads it: by the plain
    reader, or by ``pickle.loads`` when that does not read it. For tests and benchmarks."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS)
    try:
        obj = _plain_loads(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    if obj is _NOT_PLAIN:
        import pickle
        return pickle.loads(buf)
    return obj
