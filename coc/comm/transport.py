"""How a communicator's messages map onto engine messages: contexts, object framing, counting.

Every communicator owns a block of :data:`CONTEXTS` engine contexts, so traffic of two
communicators, and of point-to-point and collectives on one, never mixes:

======================  ==============================================================
``OBJ``                 lowercase point-to-point: object *heads*
``OBJ_DATA``            their large parts (pickle stream, out-of-band buffers)
``BUF``                 uppercase point-to-point (raw buffers)
``COLL``, ``COLL_DATA`` collectives, object forms (head and large parts)
``COLL_BUF``            collectives, buffer forms
======================  ==============================================================

An object travels as one *head* message of at most :data:`HEAD_SIZE` bytes. A small object
is wholly inside it: ``b"P"`` + pickle, or ``b"B"`` + pickle + its out-of-band buffers when
they all fit (one copy of a few KiB is cheaper than more messages; the receiver's arrays
then live in the head's memory). A larger one has a head ``b"M"`` naming a sequence
number and the sizes of its parts, which follow on the ``*_DATA`` context tagged with that
sequence number. A receive therefore always posts a real engine receive of ``HEAD_SIZE``
bytes: MPI's matching order, ``ANY_SOURCE``/``ANY_TAG`` and asyncio wake-ups all come from
the engine, with no probe-then-receive race; the parts are then received from the exact
sender with the exact sequence tag.
"""

import struct

import numpy as np

from coc.comm import pickling

__all__ = ["CONTEXTS", "OBJ", "OBJ_DATA", "BUF", "COLL", "COLL_DATA", "COLL_BUF",
           "HEAD_SIZE", "SLOTS", "post", "post_obj", "recv_obj", "parallel", "sent"]

CONTEXTS = 8
OBJ, OBJ_DATA, BUF, COLL, COLL_DATA, COLL_BUF = range(6)
SLOTS = 6                     # contexts of a block in use (the rest are spare)
#: What travels on each context of a block, in words (coc-run's watchdog report).
SLOT_NAMES = {OBJ: "objects", OBJ_DATA: "object data", BUF: "buffers",
              COLL: "collective", COLL_DATA: "collective data", COLL_BUF: "collective buffers"}
HEAD_SIZE = 65536 - 256      # below the eager limit: a head goes at once while the sender has eager credit
MAX_TAG = 0x7fffffff
#: Tags coc makes up itself (collective calls, sequence numbers) stay below MPICH's TAG_UB.
OWN_TAGS = (1 << 29) - 1

_SINGLE, _BUNDLE, _MULTI = ord("P"), ord("B"), ord("M")
_BUNDLE_HEAD = struct.Struct("<BIQ")       # kind, buffer count, stream bytes
_MULTI_HEAD = struct.Struct("<BIQI")        # kind, sequence, stream bytes, buffer count


def post(comm, buf, dest, tag, ctx):
    """Start sending ``buf`` to rank ``dest`` of ``comm``; return the engine request."""
    world = comm._world
    if not 0 <= dest < comm.size:
        raise ValueError(f"{comm.name}: destination rank {dest} out of range 0..{comm.size - 1}")
    target = comm._ranks[dest]
    site_mpi = comm._mpi is not None and target in comm._mpi_rank
    if site_mpi:
        req = world.site_mpi.isend(comm, buf, target, tag, ctx)
    else:
        req = world.engine.isend(buf, target, tag, comm._context + ctx)
    world.count(target, buf.nbytes if isinstance(buf, np.ndarray) else memoryview(buf).nbytes,
                site_mpi)
    return req


def post_obj(comm, obj, dest, tag, ctx):
    """Start sending object ``obj`` on context ``ctx`` (and ``ctx + 1``); return the requests."""
    stream, buffers = pickling.dumps(obj)
    if not buffers and len(stream) < HEAD_SIZE:
        return [post(comm, b"P" + stream, dest, tag, ctx)]
    sizes = struct.pack(f"<{len(buffers)}Q", *(b.nbytes for b in buffers))
    total = _BUNDLE_HEAD.size + len(sizes) + len(stream) + sum(b.nbytes for b in buffers)
    if total <= HEAD_SIZE:             # one message: copying a few KiB beats two more messages
        bundle = b"".join([_BUNDLE_HEAD.pack(_BUNDLE, len(buffers), len(stream)), sizes,
                           stream, *buffers])
        return [post(comm, bundle, dest, tag, ctx)]
    seq = comm._world.next_sequence(comm._context + ctx, comm._ranks[dest])
    head = _MULTI_HEAD.pack(_MULTI, seq, len(stream), len(buffers)) + sizes
    parts = [post(comm, head, dest, tag, ctx), post(comm, stream, dest, seq, ctx + 1)]
    parts.extend(post(comm, b, dest, seq, ctx + 1) for b in buffers)
    return parts


def recv_obj(comm, source, tag, ctx):
    """Receive one object (generator); return ``(object, engine status of its head)``."""
    world = comm._world
    head = np.empty(HEAD_SIZE, np.uint8)
    (st,) = yield [comm._irecv(head, source, tag, ctx)]
    foreign = world.sites[st.source] != world.site
    view = memoryview(head)[:st.count]
    kind = view[0] if st.count else None
    if kind == _SINGLE:
        return pickling.loads(view[1:], foreign=foreign), st
    if kind == _BUNDLE:                # buffers stay in the head's memory (no copy)
        _, count, stream_len = _BUNDLE_HEAD.unpack_from(view)
        sizes = struct.unpack_from(f"<{count}Q", view, _BUNDLE_HEAD.size)
        at = _BUNDLE_HEAD.size + 8 * count
        stream, at = view[at:at + stream_len], at + stream_len
        buffers = []
        for n in sizes:
            buffers.append(view[at:at + n])
            at += n
        return pickling.loads(stream, buffers, foreign=foreign), st
    if kind != _MULTI:
        raise ValueError(f"{comm.name}: message from rank {comm._rank_of(st.source)} "
                         f"(tag {st.tag}) is not an object; was it sent with Send?")
    _, seq, stream_len, count = _MULTI_HEAD.unpack_from(view)
    sizes = struct.unpack_from(f"<{count}Q", view, _MULTI_HEAD.size)
    parts = [np.empty(stream_len, np.uint8)] + [np.empty(n, np.uint8) for n in sizes]
    sender = comm._rank_of(st.source)
    yield [comm._irecv(p, sender, seq, ctx + 1) for p in parts]
    return pickling.loads(parts[0], [memoryview(p) for p in parts[1:]], foreign=foreign), st


def sent(parts):
    """Wait for send requests ``parts`` (generator); return None."""
    yield parts


def parallel(steps):
    """Run several generators at once (generator); return the list of their values."""
    steps = list(steps)
    results, waiting = [None] * len(steps), {}
    for i, gen in enumerate(steps):
        try:
            waiting[i] = gen.send(None)
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
