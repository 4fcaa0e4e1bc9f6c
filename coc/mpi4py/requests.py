"""mpi4py's ``Status``, ``Request`` and ``Message`` over coc's requests.

A request that has completed through ``Wait``/``Test``/``Waitall``... becomes inactive
(equal to ``REQUEST_NULL``), as in MPI: ``Waitany`` skips it and returns ``UNDEFINED`` when
no request is active.
"""

import numpy as np

from coc.comm import request as coc_request
from coc.comm.communicator import ANY_TAG, PROC_NULL, UNDEFINED
from coc.errors import CocError
from coc.mpi4py._known import refusing
from coc.mpi4py.errors import from_error
from coc.mpi4py.messages import dtype_of, message

__all__ = ["Status", "Request", "Message", "REQUEST_NULL", "MESSAGE_NULL", "mpi_errors",
           "raise_as_mpi"]


def mpi_errors(call):
    """Run ``call()``; raise coc's errors as ``MPI.Exception`` of the matching class."""
    try:
        return call()
    except (ValueError, CocError) as exc:
        raise_as_mpi(exc)


def raise_as_mpi(exc):
    """Raise ``exc`` as the ``MPI.Exception`` of its class (itself when it has none)."""
    mpi = from_error(exc)
    if mpi is None:
        raise exc
    raise mpi from exc


@refusing("Status")
class Status(coc_request.Status):
    """Source, tag, size, error and cancellation of a completed operation (mpi4py's ``Status``)."""

    __slots__ = ()

    def __init__(self, status=None):
        super().__init__()
        if status is not None:
            self._fill(status)

    def Get_count(self, datatype=None):
        """Return the number of ``datatype`` elements received (bytes by default).

        ``UNDEFINED`` when the byte count is not a whole number of elements.
        """
        if datatype is None:
            return self.count
        size = dtype_of(datatype).itemsize
        return self.count // size if self.count % size == 0 else UNDEFINED

    Get_elements = Get_count

    def Set_source(self, source):
        """Set the source rank."""
        self.source = source

    def Set_tag(self, tag):
        """Set the tag."""
        self.tag = tag

    def Set_error(self, error):
        """Set the error class."""
        self.error = error

    def Set_cancelled(self, flag):
        """Set the cancellation flag."""
        self.cancelled = bool(flag)

    def Set_elements(self, datatype, count):
        """Set the size to ``count`` elements of ``datatype``."""
        self.count = count * dtype_of(datatype).itemsize

    def __repr__(self):
        return f"<coc.mpi4py.MPI.Status source={self.source} tag={self.tag} count={self.count}>"


@refusing("Request")
class Request:
    """A non-blocking operation (mpi4py's ``Request``): ``Wait``/``Test`` and friends.

    Wraps one of coc's requests; once completed through this object it is inactive.
    """

    __slots__ = ("_r",)

    def __init__(self, request=None):
        self._r = request

    def __eq__(self, other):
        if isinstance(other, Request):
            return self._r is other._r
        return NotImplemented

    def __hash__(self):
        return id(self._r)

    def __bool__(self):
        return self._r is not None

    # one request
    def wait(self, status=None):
        """Wait; return the received object (None for sends) and make the request inactive."""
        inner = self._r
        if inner is None:
            _empty(status)
            return None
        value = mpi_errors(lambda: inner.wait(status))
        self._r = None
        return value

    def Wait(self, status=None):
        """Wait for completion, filling ``status``; return True."""
        self.wait(status)
        return True

    def test(self, status=None):
        """Return ``(True, object)`` once complete (then inactive), else ``(False, None)``."""
        inner = self._r
        if inner is None:
            _empty(status)
            return True, None
        done, value = mpi_errors(lambda: inner.test(status))
        if done:
            self._r = None
        return done, value

    def Test(self, status=None):
        """Return True once complete (then inactive), filling ``status``."""
        return self.test(status)[0]

    def get_status(self, status=None):
        """Return True once complete, without making the request inactive."""
        if self._r is None:
            _empty(status)
            return True
        return self._r.get_status(status)

    Get_status = get_status

    def Cancel(self):
        """Cancel a pending receive; ``Wait`` then completes it as cancelled."""
        if self._r is not None:
            self._r.cancel()

    cancel = Cancel

    def Free(self):
        """Make the request inactive (the operation still completes)."""
        self._r = None

    free = Free

    # many requests
    @staticmethod
    def waitall(requests, statuses=None):
        """Wait for every request; return the list of their objects."""
        return [r.wait(None if statuses is None else _status_at(statuses, i))
                for i, r in enumerate(requests)]

    @staticmethod
    def Waitall(requests, statuses=None):
        """Wait for every request (filling ``statuses``); return True."""
        Request.waitall(requests, statuses)
        return True

    @staticmethod
    def testall(requests, statuses=None):
        """Return ``(True, objects)`` when every request is complete, else ``(False, None)``."""
        if all(r._r is None or r._r.get_status() for r in requests):
            return True, Request.waitall(requests, statuses)
        return False, None

    @staticmethod
    def Testall(requests, statuses=None):
        """Return True when every request is complete (then inactive)."""
        return Request.testall(requests, statuses)[0]

    @staticmethod
    def waitany(requests, status=None):
        """Wait for one active request; return ``(index, object)`` (``UNDEFINED`` if none)."""
        inner = [r._r for r in requests]
        if all(r is None for r in inner):
            _empty(status)
            return UNDEFINED, None
        index, _ = mpi_errors(lambda: coc_request.waitany(inner, None))
        return index, requests[index].wait(status)

    @staticmethod
    def Waitany(requests, status=None):
        """Wait for one active request; return its index (``UNDEFINED`` if none is active)."""
        return Request.waitany(requests, status)[0]

    @staticmethod
    def testany(requests, status=None):
        """Return ``(index, True, object)`` of a complete request, ``(UNDEFINED, flag, None)``
        when there is none (flag True when no request is active)."""
        for i, r in enumerate(requests):
            if r._r is not None and r._r.get_status():
                return i, True, r.wait(status)
        _empty(status)
        return UNDEFINED, all(r._r is None for r in requests), None

    @staticmethod
    def Testany(requests, status=None):
        """Return ``(index, flag)`` as :meth:`testany` without the object."""
        index, flag, _ = Request.testany(requests, status)
        return index, flag

    @staticmethod
    def waitsome(requests, statuses=None):
        """Wait until at least one active request completes; return ``(indices, objects)``."""
        index, first = Request.waitany(requests, _status_at(statuses, 0))
        if index == UNDEFINED:
            return None, None
        return _complete(requests, statuses, [index], [first])

    @staticmethod
    def Waitsome(requests, statuses=None):
        """Wait until at least one active request completes; return their indices."""
        return Request.waitsome(requests, statuses)[0]

    @staticmethod
    def testsome(requests, statuses=None):
        """Return ``(indices, objects)`` of the complete requests (None when none is active)."""
        if all(r._r is None for r in requests):
            return None, None
        return _complete(requests, statuses, [], [])

    @staticmethod
    def Testsome(requests, statuses=None):
        """Return the indices of the complete requests (None when none is active)."""
        return Request.testsome(requests, statuses)[0]

    def __repr__(self):
        state = "inactive" if self._r is None else "active"
        return f"<coc.mpi4py.MPI.Request {state}>"


def _complete(requests, statuses, indices, objects):
    """Append the index and object of every request complete now; return both lists."""
    for i, r in enumerate(requests):
        if r._r is not None and r._r.get_status():
            indices.append(i)
            objects.append(r.wait(_status_at(statuses, len(indices) - 1)))
    return indices, objects


def _status_at(statuses, i):
    return statuses[i] if statuses is not None and i < len(statuses) else None


def _empty(status):
    """Fill ``status`` as MPI does for an inactive request or a PROC_NULL peer."""
    if status is not None:
        status._fill(coc_request.Status(PROC_NULL, ANY_TAG, 0))


@refusing("Message")
class Message:
    """A message taken off the queue by ``mprobe``/``Mprobe``; receive it with ``recv``/``Recv``.

    coc posts the receive for exactly the probed source and tag at probe time: messages of
    one source and tag never overtake each other, so that receive takes the probed message.
    """

    __slots__ = ("_r", "_buffer")

    def __init__(self, request=None, buffer=None):
        self._r, self._buffer = request, buffer

    def __bool__(self):
        return self._r is not None

    def recv(self, status=None):
        """Receive the probed object."""
        return Request(self._take()).wait(status)

    def irecv(self):
        """Start receiving the probed object; return a :class:`Request`."""
        return Request(self._take())

    def Recv(self, buf, status=None):
        """Receive the probed buffer message into ``buf``."""
        self.Irecv(buf).Wait(status)

    def Irecv(self, buf):
        """Start receiving the probed buffer message into ``buf``."""
        return Request(_CopyOut(self._take(), self._buffer, message(buf)))

    def _take(self):
        if self._r is None:
            from coc.mpi4py.errors import CODES, Exception
            raise Exception(CODES["ERR_REQUEST"], "message already received (MESSAGE_NULL)")
        request, self._r = self._r, None
        return request


class _CopyOut:
    """A receive into coc's own buffer that copies into the caller's buffer on completion."""

    def __init__(self, request, staging, target):
        self._request, self._staging, self._target = request, staging, target

    def _copy(self, status):
        data = self._staging[:status.count] if status is not None else self._staging
        if data.nbytes > self._target.nbytes:
            from coc.errors import TruncationError
            raise TruncationError(f"message of {data.nbytes} bytes does not fit the receive "
                                  f"buffer of {self._target.nbytes} bytes",
                                  size=data.nbytes, capacity=self._target.nbytes)
        self._target.view(np.uint8)[:data.nbytes] = data

    def wait(self, status=None):
        st = coc_request.Status()
        self._request.wait(st)
        self._copy(st)
        if status is not None:
            status._fill(st)

    def test(self, status=None):
        if not self._request.get_status():
            return False, None
        self.wait(status)
        return True, None

    def get_status(self, status=None):
        return self._request.get_status(status)

    def cancel(self):
        return False


REQUEST_NULL = Request()
MESSAGE_NULL = Message()
