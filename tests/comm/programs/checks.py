"""A rank's record of checks: compare, remember failures, print one JSON line at the end."""

import json
import traceback

import numpy as np


def same(a, b):
    """Return True when ``a`` and ``b`` are equal, comparing NumPy arrays by value and dtype."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


class Checks:
    """Count checks and keep a description of each failure."""

    def __init__(self, comm):
        self.comm, self.count, self.failures = comm, 0, []

    def equal(self, what, got, expected):
        self.count += 1
        if not same(got, expected):
            self.failures.append(f"{what}: got {_short(got)}, expected {_short(expected)}")

    def true(self, what, value):
        self.equal(what, bool(value), True)

    def raises(self, what, exc_type, fn, *args, **kwargs):
        """Check that ``fn`` raises ``exc_type``; return the exception."""
        self.count += 1
        try:
            fn(*args, **kwargs)
        except exc_type as exc:
            return exc
        except Exception:  # noqa: BLE001
            self.failures.append(f"{what}: wrong exception {traceback.format_exc(limit=2)}")
            return None
        self.failures.append(f"{what}: no {exc_type.__name__} raised")
        return None

    def report(self, **extra):
        print(json.dumps({"rank": self.comm.rank, "size": self.comm.size, "checked": self.count,
                          "failures": self.failures, "stats": self.comm.stats(), **extra}),
              flush=True)


def _short(value):
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."
