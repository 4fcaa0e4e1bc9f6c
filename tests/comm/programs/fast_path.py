"""The binding's blocking point-to-point against the communicator's general path, both ways.

``comm.Send`` and friends are the binding's fast path (``coc._engine.Direct``); the class's
methods (``coc.Communicator.Send(comm, ...)``) are the general path it falls back to. Every
check sends with one and receives with the other, and compares results, statuses, message
counters and errors, so the two cannot drift apart unseen.
"""

import pickle

import numpy as np
from checks import Checks

import coc
from coc.comm import pickling
from coc.errors import TruncationError

C = coc.Communicator
comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
ok = Checks(comm)
ok.equal("fast path bound", type(comm.Send.__self__).__name__, "Direct")


class Point:
    """A class the restricted unpickler refuses."""

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x


def status_of(st):
    return (st.source, st.tag, st.count, st.error, st.cancelled)


# Objects around the in-band limit (4096 bytes: a buffer from there on goes out of band),
# fast send -> general receive and general send -> fast receive, statuses compared.
for n in (0, 1, pickling.INBAND_LIMIT - 1, pickling.INBAND_LIMIT, pickling.INBAND_LIMIT + 1,
          *([100_000] if size > 1 else [])):       # (a blocking send to itself must be eager)
    for name, send, recv in (("fast->general", comm.send, C.recv.__get__(comm)),
                             ("general->fast", C.send.__get__(comm), comm.recv)):
        obj = {"n": n, "from": rank, "data": np.arange(n, dtype=np.uint8)}
        want = {"n": n, "from": left, "data": np.arange(n, dtype=np.uint8)}
        got_st = coc.Status()
        if size == 1:
            send(obj, 0, n % 50)
            got = recv(source=0, tag=n % 50, status=got_st)
        elif rank % 2 == 0:
            send(obj, right, n % 50)
            got = recv(source=left, tag=n % 50, status=got_st)
        else:
            got = recv(source=left, tag=n % 50, status=got_st)
            send(obj, right, n % 50)
        ok.equal(f"object {n} {name}", got, want)
        ok.equal(f"object {n} {name} status", (got_st.source, got_st.tag), (left, n % 50))
        ok.true(f"object {n} {name} count", got_st.count >= n)

# Plain data (the binding writes and reads its pickle itself) and data it hands to pickle
# (a shared list, a set, a subclass), both ways: the same objects and types arrive.
shared = [rank]
for obj in ({"step": 7, "ids": [1, 2], "v": -0.0, "t": (None, True, b"x", "é", 2**40)},
            [shared, shared], {1, 2}, coc.Status(), "x" * 5000):
    for name, send, recv in (("fast->general", comm.send, C.recv.__get__(comm)),
                             ("general->fast", C.send.__get__(comm), comm.recv)):
        if rank % 2 == 0 or size == 1:
            send(obj, right, 21)
            got = recv(source=left, tag=21)
        else:
            got = recv(source=left, tag=21)
            send(obj, right, 21)
        want = pickle.loads(pickle.dumps(obj))
        if isinstance(want, list) and want == [[rank], [rank]]:
            want = [[left], [left]]
            ok.true(f"plain {name} shared", got[0] is got[1])
        if isinstance(want, coc.Status):
            got, want = status_of(got), status_of(want)
        ok.equal(f"plain {name} {type(obj).__name__}", (type(got), repr(got)),
                 (type(want), repr(want)))

# sendrecv / Sendrecv both ways, ANY_SOURCE and ANY_TAG, statuses equal.
for name, fn in (("fast", comm.sendrecv), ("general", C.sendrecv.__get__(comm))):
    st = coc.Status()
    got = fn({"r": rank}, right, 7, None, coc.ANY_SOURCE, coc.ANY_TAG, st)
    ok.equal(f"sendrecv {name}", got, {"r": left})
    ok.equal(f"sendrecv {name} status", (st.source, st.tag), (left, 7))
statuses = []
for name, fn in (("fast", comm.Sendrecv), ("general", C.Sendrecv.__get__(comm))):
    out, into, st = np.full(5, rank, np.int64), np.zeros(5, np.int64), coc.Status()
    fn(out, right, 8, into, coc.ANY_SOURCE, coc.ANY_TAG, st)
    ok.equal(f"Sendrecv {name}", into, np.full(5, left, np.int64))
    statuses.append(status_of(st))
ok.equal("Sendrecv statuses", statuses[0], statuses[1])
ok.equal("Sendrecv status", statuses[0], (left, 8, 40, 0, False))

# Buffers: fast Send -> general Recv and back; buffer kinds the fast path hands on.
kinds = {
    "ndarray": (lambda: np.arange(6, dtype=np.float32) + rank, lambda: np.zeros(6, np.float32)),
    "bytes": (lambda: bytes([rank] * 4), lambda: bytearray(4)),
    "memoryview": (lambda: memoryview(bytearray([rank] * 4)), lambda: bytearray(4)),
    "non-contiguous": (lambda: np.arange(12, dtype=np.int16)[::2] + rank,
                       lambda: np.zeros(6, np.int16)),
    "[buf, count, dtype]": (lambda: [np.arange(8, dtype=np.int32) + rank, 3, "i4"],
                            lambda: np.zeros(3, np.int32)),
    # arrays whose bytes the fast Send reads from the array itself (no export)
    "0-d ndarray": (lambda: np.array(rank + 0.5), lambda: np.zeros((), np.float64)),
    "2-D ndarray": (lambda: np.arange(12, dtype=np.int64).reshape(3, 4) + rank,
                    lambda: np.zeros((3, 4), np.int64)),
    "empty ndarray": (lambda: np.zeros(0, np.int8), lambda: np.zeros(0, np.int8)),
    "structured ndarray": (lambda: np.array([(rank, 1.5)], [("a", "i4"), ("b", "f8")]),
                           lambda: np.zeros(1, [("a", "i4"), ("b", "f8")])),
    "Fortran-ordered ndarray": (
        lambda: np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4) + rank),
        lambda: np.zeros(12, np.int32)),
    "ndarray subclass": (lambda: np.ma.masked_array(np.arange(3, dtype=np.int16) + rank),
                         lambda: np.zeros(3, np.int16)),
}
for kind, (make_out, make_in) in kinds.items():
    results = []
    for name, send, recv in (("fast->general", comm.Send, C.Recv.__get__(comm)),
                             ("general->fast", C.Send.__get__(comm), comm.Recv)):
        into, st = make_in(), coc.Status()
        req = comm.Irecv(into, left, 11)
        send(make_out(), right, 11)
        req.Wait(st)
        results.append((bytes(memoryview(into)), status_of(st)))
        again = make_in()
        send(make_out(), right, 11)
        recv(again, left, 11, st)
        results.append((bytes(memoryview(again)), status_of(st)))
    ok.equal(f"Send/Recv {kind} agree", len(set(results)), 1)

# One array viewed with other dtypes in turn (the fast Send keeps the last dtype's size),
# and a Send that stays pending (rendezvous): it exports the array it read without an
# export, and lets go of it once done (the array can then be resized).
for dtype in (np.uint8, np.float64, np.int16, np.float64):
    out = (np.arange(64, dtype=np.uint8) + rank).view(dtype)
    into = np.zeros(64, np.uint8).view(dtype)
    req = comm.Irecv(into, left, 16)
    comm.Send(out, right, 16)
    req.Wait()
    ok.equal(f"Send of a {np.dtype(dtype)} view", into.view(np.uint8),
             np.arange(64, dtype=np.uint8) + left)
if size > 1:
    big, into = np.arange(100_000, dtype=np.float64) + rank, np.zeros(100_000)
    req = comm.Irecv(into, left, 17)
    comm.Send(big, right, 17)
    req.Wait()
    ok.equal("pending Send of an array", into, np.arange(100_000, dtype=np.float64) + left)
    big.resize(10)      # raises while an export of it is held
    ok.equal("pending Send lets go of the array", big.shape, (10,))

# A read-only array is no receive buffer, by either path (the fast one exports arrays
# itself: it must refuse what numpy's export refuses).
frozen = np.zeros(4)
frozen.flags.writeable = False
errors = []
for name, recv in (("fast", comm.Recv), ("general", C.Recv.__get__(comm))):
    try:
        recv(frozen, left, 19)
    except Exception as exc:   # noqa: BLE001 - the two paths' exception types compared
        errors.append(type(exc))
ok.equal("Recv into a read-only array", errors[:1] * 2, errors)
ok.equal("Recv into a read-only array raises", len(errors), 2)

# A non-default status class is filled through its _fill.
class MyStatus(coc.Status):
    __slots__ = ("filled",)

    def _fill(self, other):
        self.filled = True
        super()._fill(other)


mine = MyStatus()
comm.Send(np.zeros(2), right, 13)
comm.Recv(np.zeros(2), left, 13, mine)
ok.equal("status subclass", (mine.filled, mine.source, mine.tag, mine.count), (True, left, 13, 16))

# Counters move alike on both paths (messages, bytes, inter-site).
for name, send in (("fast", comm.Send), ("general", C.Send.__get__(comm))):
    comm.barrier()
    before = comm.stats()
    send(np.zeros(3), right, 14)
    after = comm.stats()
    comm.Recv(np.zeros(3), left, 14)
    delta = {k: after[k] - before[k] for k in after}
    crossed = comm.site_of(right) != comm.site
    ok.equal(f"counters {name}", delta,
             {"messages": 1, "bytes": 24, "inter_site_messages": int(crossed),
              "inter_site_bytes": 24 * crossed, "site_mpi_messages": 0})

# Errors: the same type and words from both paths.
for name, fns in (("fast", (comm.Send, comm.Recv, comm.send, comm.recv)),
                  ("general", (C.Send.__get__(comm), C.Recv.__get__(comm),
                               C.send.__get__(comm), C.recv.__get__(comm)))):
    Send, Recv, send, recv = fns
    e = ok.raises(f"{name} Send rank", ValueError, Send, np.zeros(1), size, 0)
    ok.true(f"{name} Send rank words", e is not None and f"rank {size} out of range" in str(e))
    ok.raises(f"{name} Send tag", ValueError, Send, np.zeros(1), right, -5)
    ok.raises(f"{name} send tag", ValueError, send, 1, right, 2**31)
    ok.raises(f"{name} Send float rank", TypeError, Send, np.zeros(1), 0.0, 0)
    ok.raises(f"{name} Recv rank", ValueError, Recv, np.zeros(1), size + 3, 0)
    comm.Send(np.zeros(4), right, 15)
    e = ok.raises(f"{name} truncation", TruncationError, Recv, np.zeros(2), left, 15)
    ok.true(f"{name} truncation names the rank",
            e is not None and e.source == left and f"rank {left} with tag 15" in str(e))
    send(None, coc.PROC_NULL)
    ok.equal(f"{name} recv PROC_NULL", recv(source=coc.PROC_NULL), None)
for name, fn in (("fast", comm.Sendrecv), ("general", C.Sendrecv.__get__(comm))):
    e = ok.raises(f"{name} Sendrecv truncation", TruncationError, fn, np.zeros(4), right, 18,
                  np.zeros(1), left, 18)
    ok.true(f"{name} Sendrecv truncation names the rank", e is not None and e.source == left)
    ok.raises(f"{name} Sendrecv source", ValueError, fn, np.zeros(1), right, 18,
              np.zeros(1), size + 1, 18)

# The restricted unpickler also guards the fast receive.
pickling.set_unpickler("restricted-all")
try:
    for name, recv in (("fast", comm.recv), ("general", C.recv.__get__(comm))):
        comm.send(Point(rank), right, 16)
        ok.raises(f"{name} restricted", pickle.UnpicklingError, recv, None, left, 16)
        comm.send([1, 2.5, "x"], right, 17)
        ok.equal(f"{name} restricted plain data", recv(source=left, tag=17), [1, 2.5, "x"])
finally:
    pickling.set_unpickler("default")

# A blocking collective (the fast path's Call) next to a non-blocking one (the general).
for root in range(size):
    ok.equal(f"bcast root {root}", comm.bcast({"root": root} if rank == root else None, root),
             {"root": root})
    ok.equal(f"ibcast root {root}",
             comm.ibcast({"root": root} if rank == root else None, root).wait(), {"root": root})
ok.equal("allreduce", comm.allreduce(rank + 1), size * (size + 1) // 2)
ok.equal("iallreduce", comm.iallreduce(rank + 1).wait(), size * (size + 1) // 2)
acc = np.zeros(3)
comm.Allreduce(np.full(3, rank + 1.0), acc)
ok.equal("Allreduce", acc, np.full(3, size * (size + 1) / 2))
inplace = np.full(3, rank + 1.0)
comm.Allreduce(coc.IN_PLACE, inplace)
ok.equal("Allreduce in place", inplace, np.full(3, size * (size + 1) / 2))
strided = np.zeros(6)[::2]                 # not contiguous: the result is copied into it
comm.Allreduce(np.full(3, rank + 1.0), strided)
ok.equal("Allreduce strided", strided, np.full(3, size * (size + 1) / 2))
comm.barrier()
ok.report()
