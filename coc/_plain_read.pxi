# _plain_read.pxi: included by _engine.pyx after _plain.pxi (whose opcodes it reads) and
# before _direct.pxi. The reader of plain data's pickles: a stream made only of the opcodes
# the writer writes, plus what pickle.dumps adds to plain data (FRAME, the memo, single
# APPEND/SETITEM), becomes its object without pickle's per-call set-up; any other stream
# goes to pickle.loads (issue 17, docs/engine.md "Plain data without pickle's set-up").

from libc.string cimport memcmp

cdef enum:
    PLAIN_MARKS = 64         # open MARKs the reader holds at most

# The reader's answer for a stream it does not read (pickle.loads reads it).
cdef object _NOT_PLAIN = object()


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
