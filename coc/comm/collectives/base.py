"""One collective call's messages, its mismatch checks, and the choice of algorithm.

A :class:`Call` gives an algorithm ``send(value, dest)`` and ``recv(source, into=None)``
on the communicator's collective contexts with a tag unique to this call (every rank
numbers its collective calls on a communicator alike). The same algorithm code then serves
the object forms (values are Python objects, pickled) and the buffer forms (values are
NumPy arrays sent and received in place).

Cheap mismatch checks: an object message carries the name of the collective and its root,
and a buffer message must have exactly the expected size; a rank that disagrees gets a
:class:`CollectiveMismatchError` naming both sides. Some disagreements send no message a
check could see (a root that only some ranks believe in); ``COC_CHECK_COLLECTIVES=1`` then
makes every rank compare name, root and buffer sizes before each collective (one extra
allgather per call, for debugging).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from coc.comm import transport
from coc.comm.buffers import contiguous
from coc.comm.request import Envelope, Part, Steps
from coc.errors import CollectiveMismatchError, TruncationError

if TYPE_CHECKING:
    from coc.comm.communicator import Communicator

__all__ = ["Call", "CollectiveMismatchError", "set_collective_algorithm",
           "collective_algorithm", "use_topology"]

_ALGORITHMS = ("auto", "flat", "topology")
_T = TypeVar("_T")

#: ``COC_CHECK_COLLECTIVES=1``: before every collective, all ranks compare what they called.
CHECK_ALL = os.environ.get("COC_CHECK_COLLECTIVES") == "1"
_choice = {"value": os.environ.get("COC_COLLECTIVES", "auto")}


def set_collective_algorithm(name: str) -> None:
    """Choose the collective algorithms: ``"flat"``, ``"topology"`` or ``"auto"`` (default).

    ``"topology"`` uses the multi-level algorithms whenever a communicator spans several
    sites; ``"auto"`` only when, in addition, some site holds several of its ranks (else
    there is nothing to save). The environment variable ``COC_COLLECTIVES`` sets the start
    value. Every rank must choose alike.
    """
    if name not in _ALGORITHMS:
        raise ValueError(f"collective algorithm {name!r}: expected one of {_ALGORITHMS}")
    _choice["value"] = name


def collective_algorithm() -> str:
    """Return the current choice of :func:`set_collective_algorithm`."""
    return _choice["value"]


def use_topology(sites: int, size: int, algorithm: str | None = None) -> bool:
    """Return True when a collective over ``size`` ranks on ``sites`` sites goes multi-level.

    Examples
    --------
    >>> use_topology(2, 8), use_topology(2, 2), use_topology(1, 8), use_topology(2, 2, "topology")
    (True, False, False, True)
    """
    choice = algorithm or _choice["value"]
    if choice == "flat":
        return False
    if choice == "topology":
        return sites > 1
    return 1 < sites < size


def _signature(name: str, args: Sequence[Any]) -> tuple[str, list[int], list[int]]:
    """Return what every rank must agree on: the name, the roots and the buffer sizes."""
    roots = [a for a in args if type(a) is int]
    sizes = [a.nbytes for a in args if isinstance(a, np.ndarray)]
    return name, roots, sizes


def check_signature(comm: Communicator, name: str, args: Sequence[Any]) -> None:
    """Raise :class:`CollectiveMismatchError` unless every rank calls the same collective."""
    from coc.comm.collectives import flat
    from coc.comm.request import run
    mine = _signature(name, args)
    every = run(flat.allgather(comm, mine), comm)
    for rank, theirs in enumerate(every):
        if list(theirs) != list(mine):
            raise CollectiveMismatchError(
                f"{comm.name}: rank {rank} called {theirs[0]} with roots {theirs[1]} and "
                f"buffer sizes {theirs[2]} but rank {comm.rank} called {mine[0]} with roots "
                f"{mine[1]} and buffer sizes {mine[2]}")


def one_tag(comm: Communicator, steps: Steps[_T], tag: int) -> Steps[_T]:
    """Drive the generator ``steps`` with every :class:`Call` on ``comm`` using ``tag``."""
    statuses: Any = None            # None starts the generator
    error: BaseException | None = None
    while True:
        comm._op_tag = tag
        try:
            parts = steps.send(statuses) if error is None else steps.throw(error)
        except StopIteration as stop:
            value: _T = stop.value
            return value
        finally:
            comm._op_tag = None
        try:
            statuses, error = (yield parts), None
        except Exception as exc:  # noqa: BLE001 - handed to the algorithm
            statuses, error = None, exc


def then(steps: Steps[_T], finish: Callable[[_T], object]) -> Steps[_T]:
    """Run the generator ``steps``, then ``finish(value)``; return the value (generator)."""
    value = yield from steps
    finish(value)
    return value


class Call:
    """The messages of one collective call on ``comm`` (see the module docstring).

    In a blocking collective whose peers are all reached through the engine (the
    communicator's ``_now``, set by ``Communicator._collective`` while it runs a flat
    algorithm), messages go through the binding's fast path and each receive waits at
    once: the algorithm's generator then never yields (no driver round trip, no request
    or status objects). Otherwise receives are yielded as parts (non-blocking collectives,
    the site's MPI). The messages are the same both ways.
    """

    def __init__(self, comm: Communicator, kind: str, root: int | None = None,
                 buffer: bool = False) -> None:
        self.comm, self.kind, self.root, self.buffer = comm, kind, root, buffer
        self.tag: int = comm._next_collective_tag()
        self.sends: list[Part] = []
        self.now = comm._now

    def send(self, value: Any, dest: int) -> None:
        """Start sending ``value`` (an object, or a NumPy array for buffer calls) to ``dest``."""
        now, comm, sends = self.now, self.comm, self.sends
        if self.buffer:
            if now is None or not now.post(value, dest, self.tag, transport.COLL_BUF, sends):
                sends.append(transport.post(comm, contiguous(value), dest, self.tag,
                                            transport.COLL_BUF))
        else:
            message = (self.kind, self.root, value)
            if now is None or not now.post_obj(message, dest, self.tag, transport.COLL, sends):
                sends.append(transport.post_obj(comm, message, dest, self.tag, transport.COLL))

    def recv(self, source: int, into: Any = None) -> Steps[Any]:
        """Receive from rank ``source`` (generator): an object, or into the array ``into``."""
        comm, now = self.comm, self.now
        if into is None:
            if now is not None:
                kind, root, value = now.take_obj(source, self.tag, transport.COLL)
            else:
                (kind, root, value), _ = yield from transport.recv_obj(comm, source, self.tag,
                                                                      transport.COLL)
            if kind != self.kind or root != self.root:
                raise CollectiveMismatchError(
                    f"{comm.name}: rank {source} called {_call(kind, root)} but rank "
                    f"{comm.rank} called {_call(self.kind, self.root)}")
            return value
        try:
            if now is not None:
                count = now.take(into, source, self.tag, transport.COLL_BUF)
            else:
                st: Envelope
                (st,) = yield [comm._irecv(into, source, self.tag, transport.COLL_BUF)]
                count = st.count
        except TruncationError as exc:
            raise self._size_mismatch(source, exc.size, into.nbytes) from None
        if count != into.nbytes:
            raise self._size_mismatch(source, count, into.nbytes)
        return into

    def _size_mismatch(self, source: int, got: int | None,
                       expected: int) -> CollectiveMismatchError:
        return CollectiveMismatchError(
            f"{self.comm.name}: {self.kind}: rank {source} sent {got} bytes but rank "
            f"{self.comm.rank} expected {expected} (different counts or datatypes?)")

    def finish(self) -> Steps[None]:
        """Wait for this call's sends (generator)."""
        if self.sends:
            if self.now is not None:
                for part in self.sends:
                    part.wait()
            else:
                yield self.sends
            self.sends = []


def _call(kind: str, root: int | None) -> str:
    return kind if root is None else f"{kind}(root={root})"
