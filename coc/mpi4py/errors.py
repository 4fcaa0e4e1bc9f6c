"""``MPI.Exception`` and MPI's error classes, and coc's errors seen as them.

Numbers are MPICH's (mpi4py programs compare classes by name, never by number).
"""

from coc.errors import CocError, PeerLost, TruncationError

__all__ = ["Exception", "CODES", "from_error", "error_string"]

#: error class name -> number.
CODES = {
    "SUCCESS": 0, "ERR_BUFFER": 1, "ERR_COUNT": 2, "ERR_TYPE": 3, "ERR_TAG": 4,
    "ERR_COMM": 5, "ERR_RANK": 6, "ERR_ROOT": 7, "ERR_GROUP": 8, "ERR_OP": 9,
    "ERR_TOPOLOGY": 10, "ERR_DIMS": 11, "ERR_ARG": 12, "ERR_UNKNOWN": 13,
    "ERR_TRUNCATE": 14, "ERR_OTHER": 15, "ERR_INTERN": 16, "ERR_IN_STATUS": 17,
    "ERR_PENDING": 18, "ERR_REQUEST": 19, "ERR_NO_MEM": 34, "ERR_KEYVAL": 48,
    "ERR_UNSUPPORTED_OPERATION": 44, "ERR_PROC_FAILED": 13, "ERR_PROC_ABORTED": 76,
    "ERR_LASTCODE": 1073741823,
}
globals().update(CODES)
__all__ += list(CODES)

_TEXT = {
    0: "No MPI error", 1: "Invalid buffer pointer", 2: "Invalid count", 3: "Invalid datatype",
    4: "Invalid tag", 5: "Invalid communicator", 6: "Invalid rank", 7: "Invalid root",
    8: "Invalid group", 9: "Invalid operation", 12: "Invalid argument",
    13: "Unknown error (or a process failed)", 14: "Message truncated",
    15: "Other MPI error", 16: "Internal MPI error", 19: "Invalid request",
    44: "Unsupported operation", 48: "Invalid keyval",
}


def error_string(code):
    """Return the text of error class ``code`` (``MPI.Get_error_string``)."""
    return _TEXT.get(code, f"MPI error {code}")


class Exception(RuntimeError):  # noqa: A001 - mpi4py's name
    """An MPI error with its class (mpi4py's ``MPI.Exception``): ``Get_error_class()``."""

    def __init__(self, ierr=0, message=None):
        self.error_code = self.error_class = int(ierr)
        self.error_string = message or error_string(self.error_code)
        super().__init__(self.error_string)

    def Get_error_code(self):
        """Return the error code."""
        return self.error_code

    def Get_error_class(self):
        """Return the error class (``MPI.ERR_TRUNCATE`` ...)."""
        return self.error_class

    def Get_error_string(self):
        """Return the message."""
        return self.error_string

    def __int__(self):
        return self.error_code

    def __eq__(self, other):
        return int(self) == int(other) if isinstance(other, (int, Exception)) else NotImplemented

    __hash__ = RuntimeError.__hash__


def from_error(exc):
    """Return coc's error ``exc`` as an ``MPI.Exception`` of the matching class, or None."""
    text = str(exc)
    if isinstance(exc, TruncationError):
        return Exception(CODES["ERR_TRUNCATE"], text)
    if isinstance(exc, PeerLost):
        return Exception(CODES["ERR_PROC_FAILED"], text)
    if isinstance(exc, ValueError):
        for word in ("tag", "root", "rank", "count", "buffer"):
            if word in text:
                return Exception(CODES[f"ERR_{word.upper()}"], text)
        return Exception(CODES["ERR_ARG"], text)
    if isinstance(exc, CocError):
        return Exception(CODES["ERR_OTHER"], text)
    return None
