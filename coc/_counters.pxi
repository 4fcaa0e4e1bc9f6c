# _counters.pxi: included by _engine.pyx before _direct.pxi. This process's message
# counters (coc.comm.counters) as C integers: the fast path counts a message with two
# additions, where a dict of ints made two int objects per message (issue 17).

from libc.stdint cimport int64_t


@cython.final
cdef class Counters:
    """This process's message counters: a mutable mapping of the names in :attr:`NAMES` to
    ints (``counters["messages"]``, ``dict(counters)``, ``counters[name] = 0``).

    ``messages``/``bytes``: engine messages and bytes sent; ``inter_site_*``: those that
    crossed a site boundary; ``site_mpi_messages``: those sent through the site's MPI.
    """
    cdef int64_t messages
    cdef int64_t bytes
    cdef int64_t inter_site_messages
    cdef int64_t inter_site_bytes
    cdef int64_t site_mpi_messages

    NAMES = ("messages", "bytes", "inter_site_messages", "inter_site_bytes",
             "site_mpi_messages")

    cdef inline void count(self, Py_ssize_t nbytes, bint foreign) noexcept:
        """Count one message of ``nbytes``; ``foreign``: to another site."""
        self.messages += 1
        self.bytes += nbytes
        if foreign:
            self.inter_site_messages += 1
            self.inter_site_bytes += nbytes

    cdef int64_t *_slot(self, key) except NULL:
        if key == "messages":
            return &self.messages
        if key == "bytes":
            return &self.bytes
        if key == "inter_site_messages":
            return &self.inter_site_messages
        if key == "inter_site_bytes":
            return &self.inter_site_bytes
        if key == "site_mpi_messages":
            return &self.site_mpi_messages
        raise KeyError(key)

    def __getitem__(self, key):
        return self._slot(key)[0]

    def __setitem__(self, key, int64_t value):
        self._slot(key)[0] = value

    def __contains__(self, key):
        return key in Counters.NAMES

    def __iter__(self):
        return iter(Counters.NAMES)

    def __len__(self):
        return len(Counters.NAMES)

    def keys(self):
        """The counters' names."""
        return list(Counters.NAMES)

    def values(self):
        """The counters' values, in the order of :meth:`keys`."""
        return [self[k] for k in Counters.NAMES]

    def items(self):
        """``(name, value)`` pairs."""
        return [(k, self[k]) for k in Counters.NAMES]

    def get(self, key, default=None):
        """The counter ``key``, or ``default`` for another name."""
        return self[key] if key in Counters.NAMES else default

    def copy(self):
        """A dict of the counters now."""
        return dict(self.items())

    def __eq__(self, other):
        return dict(self.items()) == (dict(other.items()) if isinstance(other, Counters)
                                      else other)

    def __repr__(self):
        return repr(dict(self.items()))
