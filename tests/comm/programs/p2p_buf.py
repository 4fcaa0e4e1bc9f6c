"""Uppercase point-to-point checks: arrays of several dtypes, bytes-likes, lists, truncation."""

import numpy as np
from checks import Checks

import coc
from coc._native import engine
from coc.errors import TruncationError

comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
ok = Checks(comm)

for dtype in ("f8", "i4", "u1", "c16", "f4"):
    for n in (0, 1, 1000, 300_000):
        send = (np.arange(n) * (rank + 1)).astype(dtype)
        recv = np.empty(n, dtype)
        st = coc.Status()
        comm.Sendrecv(send, right, 5, recv, left, 5, status=st)
        ok.equal(f"Sendrecv {dtype} {n}", recv, (np.arange(n) * (left + 1)).astype(dtype))
        ok.equal(f"count {dtype} {n}", (st.Get_count(), st.Get_count(dtype), st.source),
                 (send.nbytes, n, left))

# 2-D arrays, bytes, bytearray, memoryview and [buf, count, dtype] lists.
grid = np.arange(12.0).reshape(3, 4) + rank
out = np.empty((3, 4))
comm.Sendrecv(grid, right, 1, out, left, 1)
ok.equal("2-D", out, np.arange(12.0).reshape(3, 4) + left)
comm.Isend(f"bytes from {rank:04d}".encode(), right, 2)
ba = bytearray(15)
comm.Recv(ba, left, 2)
ok.equal("bytes->bytearray", bytes(ba), f"bytes from {left:04d}".encode())
mv = memoryview(bytearray(16))
comm.Sendrecv(memoryview(np.full(2, rank, "f8")), right, 3, [mv, 2, "f8"], left, 3)
ok.equal("memoryview list", np.frombuffer(mv, "f8"), np.full(2, left, "f8"))
big = np.zeros(10)
comm.Sendrecv([np.full(10, rank, "i8"), 4, "i8"], right, 4, [big, "f8"], left, 4)
ok.equal("list count", big[:4].view("i8"), np.full(4, left, "i8"))

# Non-blocking, several in flight, completed out of order; Probe/Iprobe.
recvs = [np.empty(100 * (i + 1)) for i in range(4)]
rreqs = [comm.Irecv(recvs[i], left, 10 + i) for i in range(4)]
sreqs = [comm.Isend(np.full(100 * (i + 1), rank * 10 + i, "f8"), right, 10 + i)
         for i in reversed(range(4))]
coc.waitall(sreqs)
statuses = [coc.Status() for _ in rreqs]
coc.Request.Waitall(rreqs, statuses)
for i in range(4):
    ok.equal(f"Irecv {i}", recvs[i], np.full(100 * (i + 1), left * 10 + i, "f8"))
    ok.equal(f"Irecv status {i}", statuses[i].tag, 10 + i)
comm.Send(np.arange(7, dtype="i2"), right, 50)
st = coc.Status()
comm.Probe(left, 50, st)
ok.equal("Probe count", st.Get_count("i2"), 7)
ok.true("Iprobe", comm.Iprobe(coc.ANY_SOURCE, 50))
box = np.empty(st.Get_count("i2"), "i2")
comm.Recv(box, st.source, st.tag)
ok.equal("Recv probed", box, np.arange(7, dtype="i2"))

# Object and buffer messages do not mix: same tag, both forms, received in either order.
comm.isend("object", right, 60)
comm.Isend(np.full(3, 60.0), right, 60)
buf = np.empty(3)
comm.Recv(buf, left, 60)
ok.equal("buffer beside object", (comm.recv(source=left, tag=60), buf[0]), ("object", 60.0))

# Truncation names source, tag and sizes; the engine keeps going afterwards.
comm.Isend(np.zeros(100, "u1"), right, 70)
exc = ok.raises("truncation", TruncationError, comm.Recv, np.empty(10, "u1"), left, 70)
if exc is not None:
    site_mpi = left in range(size) and \
        comm._lanes.via_mpi(comm._ranks[left])       # MPI does not tell the full size
    ok.equal("truncation fields", (exc.source, exc.tag, exc.size, exc.capacity),
             (left, 70, None if site_mpi else 100, 10))
    ok.equal("truncation message", str(exc).split(": ", 1)[1],
             f"message from rank {left} with tag 70 is "
             f"{'' if site_mpi else '100 bytes, '}larger than the receive buffer of 10 bytes")
    if not site_mpi:                                # the engine's code survives the renaming
        ok.equal("truncation code", type(engine.error(exc.code, "")), TruncationError)
ok.raises("bad tag", ValueError, comm.Send, b"x", right, -5)
ok.raises("bad rank", ValueError, comm.Send, b"x", size, 1)

comm.barrier()
ok.report()
