"""The binding's non-blocking point-to-point against the communicator's general path.

``comm.Isend``/``comm.Irecv``/``comm.isend``/``comm.irecv`` are the binding's fast path
(their requests are ``coc._engine.BufferRequest``); ``coc.Communicator.Isend(comm, ...)``
and the others are the general path (a ``Single`` or a generator's ``Request`` in Python). Every check runs the same operation on both and
compares what the caller sees: data, statuses (``Wait``, ``wait``, ``Test``, ``test``,
``get_status``), counters, errors and their words, cancellation, timeouts, ``PROC_NULL``,
waits over lists that mix both kinds with object requests, and ``await``.
"""

import asyncio
import pickle
import time

import numpy as np
from checks import Checks

import coc
from coc.comm import aio, pickling
from coc.errors import CocTimeoutError, TruncationError

C = coc.Communicator
comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
ok = Checks(comm)
PATHS = {"fast": (comm.Isend, comm.Irecv),
         "general": (C.Isend.__get__(comm), C.Irecv.__get__(comm))}
ok.equal("fast path bound", type(comm.Isend.__self__).__name__, "Direct")
ok.equal("fast request type", type(comm.Irecv(np.zeros(0), coc.PROC_NULL)).__name__, "Request")


class Point:
    """A class the restricted unpickler refuses."""

    def __init__(self, x):
        self.x = x


def status_of(st):
    return (st.source, st.tag, st.count, st.error, st.cancelled)


def fresh():
    """A status with values no completed operation leaves (to see what is filled)."""
    st = coc.Status(77, 77, 77)
    st.error = 77
    return st


def settle(req):
    """Complete ``req`` by Test() in a loop (bounded), as a program polling would."""
    deadline = time.monotonic() + 60
    while not req.Test():
        if time.monotonic() > deadline:
            raise RuntimeError("request not complete after 60 s")
        time.sleep(0.0005)


# The kinds of request and what the fast path hands to the general one.
seen = {}
for name, (Isend, Irecv) in PATHS.items():
    into = np.zeros(3)
    r, s = Irecv(into, left, 1), Isend(np.arange(3.0) + rank, right, 1)
    seen[name] = (type(r).__name__, type(s).__name__, isinstance(r, coc.Request),
                  isinstance(s, coc.Request))
    coc.Request.Waitall([s, r])
    ok.equal(f"{name} data", into, np.arange(3.0) + left)
ok.equal("fast requests", seen["fast"], ("BufferRequest", "BufferRequest", True, True))
ok.equal("general requests", seen["general"], ("Single", "Single", True, True))

# Every way of completing, both paths, statuses compared (sends leave theirs untouched).
ways = {
    "Wait": lambda req, st: req.Wait(st),
    "wait": lambda req, st: req.wait(st),
    "Test": lambda req, st: (settle(req), req.Test(st)),
    "test": lambda req, st: (settle(req), req.test(st)),
    "get_status": lambda req, st: (settle(req), req.get_status(st), req.Get_status(st)),
    "Waitall": lambda req, st: coc.Request.Waitall([req], [st]),
    "waitall": lambda req, st: coc.Request.waitall([req], [st]),
    "Testall": lambda req, st: (settle(req), coc.Request.Testall([req], [st])),
    "await": lambda req, st: asyncio.run(aio.wait(req, st)),
}
for way, finish in ways.items():
    got = {}
    for name, (Isend, Irecv) in PATHS.items():
        into, rst, sst = np.zeros(5, np.int32), fresh(), fresh()
        r = Irecv(into, coc.ANY_SOURCE if way == "Wait" else left,
                  coc.ANY_TAG if way == "wait" else 2)
        s = Isend(np.full(5, rank, np.int32), right, 2)
        results = (finish(s, sst), finish(r, rst))
        got[name] = (into.tolist(), status_of(rst), status_of(sst), repr(results))
    ok.equal(f"{way}: both paths", got["fast"], got["general"])
    ok.equal(f"{way}: receive status", got["fast"][1], (left, 2, 20, 0, False))
    ok.equal(f"{way}: send status untouched", got["fast"][2], (77, 77, 77, 77, False))

# Buffer kinds: the fast path takes C-contiguous buffers, hands the rest on.
kinds = {
    "ndarray": (lambda: np.arange(6, dtype=np.float32) + rank, lambda: np.zeros(6, np.float32)),
    "bytes": (lambda: bytes([rank] * 4), lambda: bytearray(4)),
    "memoryview": (lambda: memoryview(bytearray([rank] * 4)), lambda: memoryview(bytearray(4))),
    "non-contiguous send": (lambda: np.arange(12, dtype=np.int16)[::2] + rank,
                            lambda: np.zeros(6, np.int16)),
    "2-D Fortran order": (lambda: np.asfortranarray(np.arange(6.0).reshape(2, 3) + rank),
                          lambda: np.zeros((2, 3))),
    "[buf, count, dtype]": (lambda: [np.arange(8, dtype=np.int32) + rank, 3, "i4"],
                            lambda: [np.zeros(8, np.int32), 3, "i4"]),
}
for kind, (make_out, make_in) in kinds.items():
    got = []
    for recv_path in PATHS:
        for send_path in PATHS:
            into, st = make_in(), fresh()
            r = PATHS[recv_path][1](into, left, 3)
            s = PATHS[send_path][0](make_out(), right, 3)
            s.Wait()
            r.Wait(st)
            data = into[0][:3] if type(into) is list else into
            got.append((bytes(memoryview(np.ascontiguousarray(data))), status_of(st)))
    ok.equal(f"{kind}: every pairing alike", len(set(got)), 1)
for name, (Isend, Irecv) in PATHS.items():
    e = ok.raises(f"{name} non-contiguous receive", ValueError, Irecv,
                  np.zeros(12)[::2], left, 3)
    ok.true(f"{name} non-contiguous receive words", e is not None and "contiguous" in str(e))
    ok.true(f"{name} non-contiguous receive: one error", e is not None and e.__context__ is None)
    e = ok.raises(f"{name} read-only receive", ValueError, Irecv, bytes(4), left, 3)
    ok.true(f"{name} read-only receive words", e is not None and "read-only" in str(e))

# Counters move alike (counted when posted).
for name, (Isend, Irecv) in PATHS.items():
    comm.barrier()
    before = comm.stats()
    s = Isend(np.zeros(3), right, 4)
    after = comm.stats()
    comm.Recv(np.zeros(3), left, 4)
    s.Wait()
    delta = {k: after[k] - before[k] for k in after}
    crossed = comm.site_of(right) != comm.site
    ok.equal(f"counters {name}", delta,
             {"messages": 1, "bytes": 24, "inter_site_messages": int(crossed),
              "inter_site_bytes": 24 * crossed, "site_mpi_messages": 0})

# Errors: the same type and words, raised again at every wait.
for name, (Isend, Irecv) in PATHS.items():
    e = ok.raises(f"{name} Isend rank", ValueError, Isend, np.zeros(1), size, 0)
    ok.true(f"{name} Isend rank words", e is not None and f"rank {size} out of range" in str(e))
    ok.raises(f"{name} Isend tag", ValueError, Isend, np.zeros(1), right, -5)
    ok.raises(f"{name} Isend tag 2**31", ValueError, Isend, np.zeros(1), right, 2**31)
    ok.raises(f"{name} Isend float rank", TypeError, Isend, np.zeros(1), 0.0, 0)
    e = ok.raises(f"{name} Irecv rank", ValueError, Irecv, np.zeros(1), size + 3, 0)
    ok.true(f"{name} Irecv rank words", e is not None and f"rank {size + 3}" in str(e))
    r = Irecv(np.zeros(2), left, 5)
    comm.Send(np.zeros(4), right, 5)
    words = []
    for attempt in range(2):
        e = ok.raises(f"{name} truncation {attempt}", TruncationError, r.Wait, fresh())
        ok.true(f"{name} truncation names the rank",
                e is not None and e.source == left and f"rank {left} with tag 5" in str(e))
        words.append(str(e))
    ok.equal(f"{name} truncation again", words[0], words[1])
    st = fresh()
    ok.true(f"{name} get_status of a failed receive", r.get_status(st))
    ok.equal(f"{name} get_status of a failed receive leaves the status",
             status_of(st), (77, 77, 77, 77, False))
    ok.raises(f"{name} Test of a failed receive", TruncationError, r.Test)

# PROC_NULL: complete at once, the status says so.
for name, (Isend, Irecv) in PATHS.items():
    st = fresh()
    ok.true(f"{name} Isend PROC_NULL", Isend(np.zeros(1), coc.PROC_NULL, 0).Wait())
    Irecv(np.zeros(1), coc.PROC_NULL, 0).Wait(st)
    ok.equal(f"{name} Irecv PROC_NULL status", status_of(st)[:3], (coc.PROC_NULL, coc.ANY_TAG, 0))

# Cancellation: a receive that never matches completes as cancelled; a send is not cancelled.
for name, (Isend, Irecv) in PATHS.items():
    into = np.full(2, 9.0)
    lonely = Irecv(into, left, 30_000 + rank)
    ok.equal(f"{name} pending", lonely.Test(), False)
    ok.true(f"{name} cancel", lonely.Cancel())
    ok.equal(f"{name} cancel again", lonely.cancel(), False)
    st = fresh()
    ok.true(f"{name} get_status cancelled", lonely.get_status(st))
    ok.equal(f"{name} get_status cancelled status", status_of(st), (-1, -1, 0, 0, True))
    st = fresh()
    ok.true(f"{name} Wait cancelled", lonely.Wait(st))
    ok.equal(f"{name} cancelled status", status_of(st), (-1, -1, 0, 0, True))
    ok.equal(f"{name} cancelled buffer untouched", into, np.full(2, 9.0))
    s = Isend(np.zeros(1), right, 31)
    ok.equal(f"{name} send not cancelled", s.cancel(), False)
    s.Wait()
    comm.Recv(np.zeros(1), left, 31)

# A timeout leaves the request pending; it completes later.
for name, (Isend, Irecv) in PATHS.items():
    into, st = np.zeros(1), fresh()
    r = Irecv(into, left, 32)
    ok.raises(f"{name} timeout", CocTimeoutError, r.wait, None, 0.05)
    ok.equal(f"{name} still pending", r.Test(), False)
    comm.barrier()                  # every rank has looked before the message is sent
    comm.Send(np.full(1, 5.0), right, 32)
    r.Wait(st)
    ok.equal(f"{name} after timeout", (into[0], status_of(st)), (5.0, (left, 32, 8, 0, False)))

# Lists that mix fast, general and object requests: waitall, testall, waitany.
reqs = [comm.Irecv(np.zeros(2), left, 40), C.Irecv(comm, np.zeros(2), left, 41),
        comm.irecv(source=left, tag=42)]
ok.equal("testall before", coc.Request.testall(reqs), (False, None))
comm.barrier()
sends = [comm.Isend(np.ones(2), right, 40), C.Isend(comm, np.ones(2), right, 41),
         comm.isend({"from": rank}, right, 42)]
statuses = [fresh() for _ in reqs]
ok.equal("mixed waitall", coc.Request.waitall(reqs, statuses), [None, None, {"from": left}])
ok.equal("mixed waitall statuses", [status_of(s)[:3] for s in statuses],
         [(left, 40, 16), (left, 41, 16), (left, 42, statuses[2].count)])
ok.equal("mixed testall", coc.Request.testall(sends), (True, [None, None, None]))
ok.true("mixed Testall", coc.Request.Testall(sends))
ok.true("Waitall of a tuple", coc.Request.Waitall(tuple(sends)))
pending = [comm.Irecv(np.zeros(1), left, 43), None, C.Irecv(comm, np.zeros(1), left, 44)]
comm.Send(np.zeros(1), right, 44)
comm.Send(np.zeros(1), right, 43)
first, _ = coc.Request.waitany(pending)
ok.true("waitany", first in (0, 2))
pending[first] = None
ok.true("waitany second", coc.Request.waitany(pending)[0] in (0, 2))


# Objects: isend/irecv on both paths, every pairing, small (one pickle) and large (a
# buffer out of band: the fast isend hands it on, the fast irecv decodes it).
OBJ_PATHS = {"fast": (comm.isend, comm.irecv),
             "general": (C.isend.__get__(comm), C.irecv.__get__(comm))}
ok.equal("fast object requests", (type(comm.irecv(None, coc.PROC_NULL)).__name__,
                                  type(comm.isend(None, coc.PROC_NULL)).__name__),
         ("Request", "Request"))
for n in (0, 100, 5000):
    for recv_path in OBJ_PATHS:
        for send_path in OBJ_PATHS:
            what = f"object {n} {send_path}->{recv_path}"
            obj = {"from": rank, "data": np.arange(n, dtype=np.uint8)}
            r = OBJ_PATHS[recv_path][1](None, left, 60)
            s = OBJ_PATHS[send_path][0](obj, right, 60)
            st = fresh()
            got = r.wait(st)
            ok.equal(what, got, {"from": left, "data": np.arange(n, dtype=np.uint8)})
            ok.true(f"{what}: the same object at every wait", r.wait() is got
                    and r.test() == (True, got) and coc.Request.waitall([r]) == [got])
            ok.equal(f"{what}: status", status_of(st)[:2] + status_of(st)[3:],
                     (left, 60, 0, False))
            ok.true(f"{what}: status count", st.count > n)
            ok.equal(f"{what}: send", (s.wait(), s.test()), (None, (True, None)))
kinds = {}
for name, (isend, irecv) in OBJ_PATHS.items():
    r = irecv(source=coc.ANY_SOURCE, tag=coc.ANY_TAG)
    ok.equal(f"{name} object pending", r.test(), (False, None))
    comm.barrier()
    s = isend([1, "two", 3.0], right, 61)
    done, got = False, None
    deadline = time.monotonic() + 60
    while not done and time.monotonic() < deadline:
        done, got = r.test()
    ok.equal(f"{name} object by test", got, [1, "two", 3.0])
    st = fresh()
    ok.true(f"{name} object get_status", r.get_status(st))
    ok.equal(f"{name} object get_status status", status_of(st)[:2], (left, 61))
    s.wait()
    # cancelled, PROC_NULL, rank errors
    lonely = irecv(None, left, 30_100 + rank)
    ok.true(f"{name} object cancel", lonely.cancel())
    st = fresh()
    ok.equal(f"{name} object cancelled", (lonely.wait(st), status_of(st)),
             (None, (-1, -1, 0, 0, True)))
    st = fresh()
    ok.equal(f"{name} object PROC_NULL", (irecv(None, coc.PROC_NULL).wait(st),
                                          isend(1, coc.PROC_NULL).wait()), (None, None))
    ok.equal(f"{name} object PROC_NULL status", status_of(st)[:3],
             (coc.PROC_NULL, coc.ANY_TAG, 0))
    e = ok.raises(f"{name} isend rank", ValueError, isend, 1, size, 0)
    ok.true(f"{name} isend rank words", e is not None and f"rank {size}" in str(e))
    ok.raises(f"{name} isend tag", ValueError, isend, 1, right, -3)
    ok.raises(f"{name} irecv rank", ValueError, irecv, None, size + 1, 0)
    # A buffer message on the objects' context is not an object; a restricted class is
    # refused; both raised again at the next wait, and get_status fills nothing.
    pickling.set_unpickler("restricted-all")
    try:
        r = irecv(None, left, 62)
        comm.send(Point(rank), right, 62)
        words = []
        for attempt in range(2):
            e = ok.raises(f"{name} restricted {attempt}", pickle.UnpicklingError, r.wait)
            words.append(str(e))
        ok.equal(f"{name} restricted again", words[0], words[1])
        st = fresh()
        ok.true(f"{name} restricted get_status", r.get_status(st))
        ok.equal(f"{name} restricted get_status status", status_of(st), (77, 77, 77, 77, False))
    finally:
        pickling.set_unpickler("default")
    kinds[name] = (type(r).__name__ == "BufferRequest", isinstance(r, coc.Request))
ok.equal("object request kinds", kinds, {"fast": (True, True), "general": (False, True)})
# Mixed object lists: waitall returns the objects in order.
reqs = [comm.irecv(None, left, 63), C.irecv(comm, None, left, 64), comm.Irecv(np.zeros(1), left, 65)]
comm.isend("a", right, 63)
C.isend(comm, "b", right, 64)
comm.Isend(np.ones(1), right, 65)
ok.equal("mixed object waitall", coc.Request.waitall(reqs), ["a", "b", None])


# asyncio: await both kinds, and gather them.
async def both():
    into = [np.zeros(1), np.zeros(1)]
    got = [comm.Irecv(into[0], left, 50), C.Irecv(comm, into[1], left, 51)]
    await comm.Isend(np.full(1, 1.0), right, 50)
    await C.Isend(comm, np.full(1, 2.0), right, 51)
    await aio.gather(*got)
    await comm.aSend(np.full(1, 3.0), right, 52)
    last = np.zeros(1)
    await comm.aRecv(last, left, 52)
    return [x[0] for x in into] + [last[0]]
ok.equal("asyncio", asyncio.run(both()), [1.0, 2.0, 3.0])

comm.barrier()
ok.report()
