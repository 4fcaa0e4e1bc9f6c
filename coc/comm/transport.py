"""How a communicator's messages map onto engine messages: contexts, object encoding, counting.

Every communicator owns a block of :data:`CONTEXTS` engine contexts, so traffic of two
communicators, and of point-to-point and collectives on one, never mixes:

======================  ==============================================================
``OBJ``                 lowercase point-to-point (objects)
``BUF``                 uppercase point-to-point (raw buffers)
``COLL``                collectives, object forms
``COLL_BUF``            collectives, buffer forms
======================  ==============================================================

An object travels as ONE engine message. Without out-of-band buffers the message is the
pickle stream itself (it starts with pickle's ``PROTO`` opcode, ``0x80``). With them it is
sent as a gather list, ``head + stream + buffers`` (``Engine.isendv``: no join of large
buffers), where the head is ``b"B"``, the buffer count, the stream's length and each
buffer's length; every buffer starts at a multiple of :data:`ALIGN` bytes from the
message's start. The receiver posts a receive without a buffer (``Engine.irecv_alloc``):
the engine allocates the message's exact size when it matches, so MPI's matching order,
``ANY_SOURCE``/``ANY_TAG`` and asyncio wake-ups all come from the engine, and the received
arrays live in that memory (no copy).
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from coc.comm import pickling
from coc.comm.request import Envelope, Part, Steps

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

    from coc.comm.communicator import Communicator

__all__ = ["CONTEXTS", "OBJ", "BUF", "COLL", "COLL_BUF", "SLOTS", "ALIGN", "post",
           "post_obj", "encode_obj", "recv_obj", "decode_obj", "parallel", "sent"]

CONTEXTS = 8
OBJ, BUF, COLL, COLL_BUF = 0, 2, 3, 5     # slots 1 and 4 are spare (once objects' parts)
SLOTS = 6                     # contexts of a block in use (the rest are spare)
#: What travels on each context of a block, in words (coc-run's watchdog report).
SLOT_NAMES = {OBJ: "objects", BUF: "buffers", COLL: "collective",
              COLL_BUF: "collective buffers"}
MAX_TAG = 0x7fffffff
#: Tags coc makes up itself (collective calls) stay below MPICH's TAG_UB.
OWN_TAGS = (1 << 29) - 1
#: Out-of-band buffers of an object start at multiples of this many bytes in its message.
ALIGN = 64

_PICKLE, _GATHER = 0x80, ord("B")
_HEAD = struct.Struct("<BxxxIQ")           # kind, buffer count, stream bytes
_ZEROS = bytes(ALIGN)

#: What one message is sent from: one buffer, or a gather list sent as one message.
Message = Union["Buffer", "npt.NDArray[Any]", "list[Buffer]"]


def post(comm: Communicator, buf: Message, dest: int, tag: int, ctx: int) -> Part:
    """Start sending ``buf`` (or a list of buffers, as one message) to rank ``dest``.

    Returns the engine request (or the site MPI's: the engine port chooses).
    """
    if not 0 <= dest < comm.size:
        raise ValueError(f"{comm.name}: destination rank {dest} out of range 0..{comm.size - 1}")
    target, lanes = comm._ranks[dest], comm._lanes
    req = lanes.isend(buf, target, tag, ctx)
    if type(buf) is list:               # (type(), not isinstance(): a send's hot path)
        nbytes = sum(memoryview(b).nbytes for b in buf)
    else:
        nbytes = (buf.nbytes if isinstance(buf, np.ndarray)
                  else memoryview(buf).nbytes)  # type: ignore[arg-type]  # no list here
    comm._world.count(target, nbytes, not lanes.direct and lanes.via_mpi(target))
    return req


def post_obj(comm: Communicator, obj: Any, dest: int, tag: int, ctx: int) -> Part:
    """Start sending object ``obj`` as one message on context ``ctx``; return the request."""
    return post(comm, encode_obj(obj), dest, tag, ctx)


def encode_obj(obj: Any) -> Message:
    """Return the message of ``obj``: its pickle stream, or a gather list (see above)."""
    try:
        return pickling.stream(obj)       # no large buffer inside: the small-message path
    except pickling.OutOfBand:
        stream, buffers = pickling.dumps_out_of_band(obj)
    sizes = [b.nbytes for b in buffers]
    head = _HEAD.pack(_GATHER, len(sizes), len(stream)) + struct.pack(f"<{len(sizes)}Q", *sizes)
    parts: list[Buffer] = [head, stream]
    at = len(head) + len(stream)
    for b, n in zip(buffers, sizes):
        pad = -at % ALIGN
        if pad:
            parts.append(_ZEROS[:pad])
        parts.append(b)
        at += pad + n
    return parts


def decode_obj(comm: Communicator, message: Buffer | None, st: Envelope) -> Any:
    """Return the object in ``message`` (the bytes of one object message, status ``st``)."""
    world = comm._world
    view = memoryview(message) if message is not None else memoryview(b"")
    kind = view[0] if len(view) else None
    restricting = pickling.restricting()
    if kind == _PICKLE and not restricting:
        return pickle.loads(view)         # plain pickle, no buffers: the small-message path
    foreign = restricting and world.sites[st.source] != world.site
    if kind == _PICKLE:
        return pickling.loads(view, foreign=foreign)
    if kind != _GATHER or len(view) < _HEAD.size:
        raise ValueError(f"{comm.name}: message from rank {comm._rank_of(st.source)} "
                         f"(tag {st.tag}) is not an object; was it sent with Send?")
    _, count, stream_len = _HEAD.unpack_from(view)
    at = _HEAD.size + 8 * count
    if at > len(view):
        raise ValueError(f"{comm.name}: object message from rank {comm._rank_of(st.source)} "
                         f"(tag {st.tag}) names {count} buffers but holds {len(view)} bytes")
    sizes = struct.unpack_from(f"<{count}Q", view, _HEAD.size)
    stream, at = view[at:at + stream_len], at + stream_len
    buffers: list[memoryview] = []
    for n in sizes:
        at += -at % ALIGN
        buffers.append(view[at:at + n])
        at += n
    if at > len(view):
        raise ValueError(f"{comm.name}: object message from rank {comm._rank_of(st.source)} "
                         f"(tag {st.tag}) is {len(view)} bytes, shorter than its head says "
                         f"({at})")
    return pickling.loads(stream, buffers, foreign=foreign)


def recv_obj(comm: Communicator, source: int, tag: int, ctx: int
             ) -> Steps[tuple[Any, Envelope]]:
    """Receive one object (generator); return ``(object, engine status)``."""
    part = comm._irecv(None, source, tag, ctx)
    (st,) = yield [part]
    return decode_obj(comm, part.message(), st), st


def sent(parts: list[Part]) -> Steps[None]:
    """Wait for send requests ``parts`` (generator); return None."""
    yield parts


def parallel(steps: Iterable[Steps[Any]]) -> Steps[list[Any]]:
    """Run several generators at once (generator); return the list of their values."""
    steps = list(steps)
    results: list[Any] = [None] * len(steps)
    waiting: dict[int, list[Part]] = {}
    for i, gen in enumerate(steps):
        try:
            waiting[i] = next(gen)
        except StopIteration as stop:
            results[i] = stop.value
    while waiting:
        order = list(waiting.items())
        statuses = yield [part for _, parts in order for part in parts]
        at = 0
        for i, parts in order:
            mine, at = statuses[at:at + len(parts)], at + len(parts)
            try:
                waiting[i] = steps[i].send(mine)
            except StopIteration as stop:
                results[i] = stop.value
                del waiting[i]
    return results
