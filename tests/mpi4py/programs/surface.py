"""mpi4py's documented behaviour, checked by a program written for mpi4py alone.

Run by tests/mpi4py/test_surface.py under plain ``mpiexec`` (the real mpi4py, so the checks
themselves are checked) and under ``coc-run --mpi4py`` across two sites, at 1, 2, 4, 8 ranks.
Every rank prints ``rank R: N checks passed`` at the end; a failed check raises.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
coc = MPI.get_vendor()[0] == "coc"
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(f"rank {rank}: {what}")
    checks += 1


def raises(error_class, call):
    try:
        call()
    except MPI.Exception as exc:
        return exc.Get_error_class() == error_class
    return False


# -- module constants and environment -------------------------------------------------------
check(comm.Get_size() == comm.size and comm.Get_rank() == comm.rank, "rank/size")
check(len({MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL} - {0}) >= 2, "distinct wildcards")
check(MPI.UNDEFINED < 0 and MPI.IN_PLACE is not None, "UNDEFINED, IN_PLACE")
check(comm.Get_attr(MPI.TAG_UB) >= 32767, "TAG_UB")
check(isinstance(MPI.Get_version(), tuple) and MPI.Get_version()[0] >= 3, "Get_version")
check(MPI.Is_initialized() and not MPI.Is_finalized(), "initialized")
check(MPI.Query_thread() in (MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED,
                             MPI.THREAD_MULTIPLE), "Query_thread")
check(MPI.Wtick() > 0 and MPI.Wtime() <= MPI.Wtime(), "Wtime/Wtick")
check(isinstance(MPI.Get_processor_name(), str), "Get_processor_name")
check(MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF.Get_rank() == 0, "COMM_SELF")
check(MPI.COMM_WORLD.Get_name() == "MPI_COMM_WORLD", "world name")
check(MPI.Compute_dims(12, [0, 3, 0]) == [2, 3, 2], "Compute_dims")

# -- datatypes ------------------------------------------------------------------------------
for t, n in ((MPI.BYTE, 1), (MPI.CHAR, 1), (MPI.INT, 4), (MPI.FLOAT, 4), (MPI.DOUBLE, 8),
             (MPI.C_BOOL, 1), (MPI.INT8_T, 1), (MPI.INT64_T, 8), (MPI.UINT16_T, 2),
             (MPI.C_DOUBLE_COMPLEX, 16), (MPI.C_FLOAT_COMPLEX, 8), (MPI.LONG_LONG, 8)):
    check(t.Get_size() == n and t.Get_extent() == (0, n), f"{t.Get_name()} size")
check(MPI.DOUBLE.typechar == "d" and MPI.INT.typechar == "i", "typechar")
check(MPI.Datatype.fromcode("d") == MPI.DOUBLE, "fromcode")

# -- point to point: buffers ----------------------------------------------------------------
outgoing = []                     # sends to `right` may be sends to self: never blocking
data = np.arange(10, dtype="d") + 100 * rank
got = np.zeros(10)
status = MPI.Status()
req = comm.Irecv([got, 4, MPI.DOUBLE], source=left, tag=3)
comm.Send([data, (4, 2), MPI.DOUBLE], dest=right, tag=3)
req.Wait(status)
check((got[:4] == np.arange(2, 6) + 100 * left).all() and (got[4:] == 0).all(), "count/displ")
check(status.Get_source() == left and status.Get_tag() == 3, "status source/tag")
check(status.Get_count(MPI.DOUBLE) == 4 and status.Get_count() == 32, "Get_count")
check(status.Get_elements(MPI.DOUBLE) == 4 and status.Get_count(MPI.INT64_T) == 4, "elements")
check(req == MPI.REQUEST_NULL, "completed request is REQUEST_NULL")

sends = [comm.Isend([data, MPI.DOUBLE], dest=right, tag=t) for t in (10, 11)]
bufs = [np.empty(10) for _ in range(2)]
recvs = [comm.Irecv(bufs[i], source=left, tag=10 + i) for i in range(2)]
statuses = [MPI.Status() for _ in range(2)]
check(MPI.Request.Waitall(recvs, statuses) is True, "Waitall")
check([s.Get_tag() for s in statuses] == [10, 11], "Waitall statuses")
check(all((b == np.arange(10) + 100 * left).all() for b in bufs), "Waitall data")
done = []
while len(done) < 2:
    index = MPI.Request.Waitany(sends)
    check(index not in done and 0 <= index < 2, "Waitany index")
    done.append(index)
check(MPI.Request.Waitany(sends) == MPI.UNDEFINED, "Waitany with no active request")
check(MPI.Request.Testall(sends), "Testall on inactive requests")

reqs = [comm.Irecv(np.empty(1), source=left, tag=20 + i) for i in range(3)]
for i in range(3):
    comm.Send(np.array([float(i)]), dest=right, tag=20 + i)
seen = []
while len(seen) < 3:
    some = MPI.Request.Waitsome(reqs)
    check(some, "Waitsome returns indices")
    seen += some
check(sorted(seen) == [0, 1, 2] and MPI.Request.Waitsome(reqs) is None, "Waitsome")

ring = np.full(3, rank, dtype="i")
comm.Sendrecv_replace([ring, MPI.INT], dest=right, sendtag=4, source=left, recvtag=4)
check((ring == left).all(), "Sendrecv_replace")

outgoing.append(comm.Isend([np.arange(5, dtype="i"), MPI.INT], dest=right, tag=5))
comm.Probe(source=left, tag=5, status=status)
check(status.Get_count(MPI.INT) == 5 and status.Get_source() == left, "Probe status")
probed = np.empty(5, dtype="i")
comm.Recv([probed, MPI.INT], source=status.Get_source(), tag=status.Get_tag())
check((probed == np.arange(5)).all(), "receive after Probe")
check(not comm.Iprobe(source=left, tag=5), "Iprobe: nothing left")

outgoing.append(comm.Isend([np.arange(3, dtype="i8"), MPI.INT64_T], dest=right, tag=6))
msg = comm.Mprobe(source=MPI.ANY_SOURCE, tag=6, status=status)
check(status.Get_source() == left and status.Get_count(MPI.INT64_T) == 3, "Mprobe status")
matched = np.empty(3, dtype="i8")
msg.Recv([matched, MPI.INT64_T])
check((matched == np.arange(3)).all(), "Message.Recv")

comm.Recv([np.empty(1), MPI.DOUBLE], source=MPI.PROC_NULL, status=status)
check(status.Get_source() == MPI.PROC_NULL and status.Get_count() == 0, "PROC_NULL receive")
comm.Send([np.empty(1), MPI.DOUBLE], dest=MPI.PROC_NULL)

pending = comm.Irecv(np.empty(1), source=left, tag=999)
pending.Cancel()
pending.Wait(status)
check(status.Is_cancelled(), "Cancel an unmatched receive")

# -- point to point: objects ----------------------------------------------------------------
outgoing.append(comm.isend({"from": rank, "list": [rank] * 3}, dest=right, tag=7))
obj = comm.recv(source=left, tag=7, status=status)
check(obj == {"from": left, "list": [left] * 3} and status.Get_source() == left, "send/recv")
r = comm.irecv(source=left, tag=8)
s = comm.isend(("tuple", rank), dest=right, tag=8)
check(MPI.Request.waitall([r, s]) == [("tuple", left), None], "waitall objects")
check(comm.sendrecv(rank, dest=right, source=left) == left, "sendrecv")
outgoing.append(comm.isend("probe me", dest=right, tag=9))
check(comm.probe(source=left, tag=9) is True, "probe")
check(comm.recv(source=left, tag=9) == "probe me", "recv after probe")
outgoing.append(comm.isend([1, 2, 3], dest=right, tag=12))
m = comm.mprobe(source=MPI.ANY_SOURCE, tag=12, status=status)
check(status.Get_source() == left and m.recv() == [1, 2, 3], "mprobe")
r = comm.irecv(source=left, tag=13)
flag, value = r.test()
outgoing.append(comm.isend("late", dest=right, tag=13))
check((value if flag else r.wait()) == "late" and r == MPI.REQUEST_NULL, "irecv test then wait")
check(comm.recv(source=MPI.PROC_NULL) is None, "recv from PROC_NULL")

MPI.Request.Waitall(outgoing)

# -- collectives: objects -------------------------------------------------------------------
comm.barrier()
check(comm.bcast({"root": 0} if rank == 0 else None, root=0) == {"root": 0}, "bcast")
root = size - 1
items = comm.scatter([i * i for i in range(size)] if rank == root else None, root=root)
check(items == rank * rank, "scatter")
gathered = comm.gather(rank, root=root)
check(gathered == (list(range(size)) if rank == root else None), "gather")
check(comm.allgather(rank) == list(range(size)), "allgather")
check(comm.alltoall([(rank, d) for d in range(size)]) == [(s, rank) for s in range(size)],
      "alltoall")
check(comm.reduce(rank, op=MPI.SUM, root=0) == (sum(range(size)) if rank == 0 else None),
      "reduce")
check(comm.allreduce(rank, op=MPI.MAX) == size - 1, "allreduce MAX")
check(comm.allreduce((rank % 3, rank), op=MPI.MAXLOC) == (max(r % 3 for r in range(size)),
      min(r for r in range(size) if r % 3 == max(q % 3 for q in range(size)))), "MAXLOC")
check(comm.scan(rank + 1) == (rank + 1) * (rank + 2) // 2, "scan")
check(comm.exscan(rank + 1) == (None if rank == 0 else rank * (rank + 1) // 2), "exscan")
concat = MPI.Op.Create(lambda a, b, datatype: a + b, commute=False)
check(comm.allreduce(str(rank), op=concat) == "".join(map(str, range(size))),
      "non-commutative user op in rank order")
check(not concat.is_commutative and MPI.SUM.is_commutative, "is_commutative")
concat.Free()

# -- collectives: buffers -------------------------------------------------------------------
comm.Barrier()
buf = np.arange(4, dtype="i") if rank == 0 else np.zeros(4, dtype="i")
comm.Bcast([buf, MPI.INT], root=0)
check((buf == np.arange(4)).all(), "Bcast")
send = np.arange(size * 2, dtype="d") if rank == 0 else None
piece = np.empty(2)
comm.Scatter([send, MPI.DOUBLE] if rank == 0 else None, [piece, MPI.DOUBLE], root=0)
check((piece == [2 * rank, 2 * rank + 1]).all(), "Scatter")
full = np.empty(size * 2) if rank == 0 else None
comm.Gather(piece, [full, MPI.DOUBLE] if rank == 0 else None, root=0)
check(rank != 0 or (full == np.arange(size * 2)).all(), "Gather")
every = np.empty(size, dtype="i")
comm.Allgather([np.array([rank], dtype="i"), MPI.INT], [every, MPI.INT])
check((every == np.arange(size)).all(), "Allgather")
out = np.array([rank * 100 + d for d in range(size)], dtype="i")
into = np.empty(size, dtype="i")
comm.Alltoall(out, into)
check((into == np.array([s * 100 + rank for s in range(size)])).all(), "Alltoall")

counts = [r + 1 for r in range(size)]
displs = [sum(counts[:r]) for r in range(size)]
mine = np.full(rank + 1, rank, dtype="d")
allv = np.empty(sum(counts))
comm.Allgatherv(mine, [allv, counts, displs, MPI.DOUBLE])
check((allv == np.repeat(np.arange(size), counts)).all(), "Allgatherv")
gv = np.empty(sum(counts)) if rank == 0 else None
comm.Gatherv(mine, [gv, (counts, displs), MPI.DOUBLE] if rank == 0 else None, root=0)
check(rank != 0 or (gv == allv).all(), "Gatherv")
sv = np.empty(rank + 1)
comm.Scatterv([allv, counts, displs, MPI.DOUBLE] if rank == 0 else None, sv, root=0)
check((sv == rank).all(), "Scatterv")
scounts = [1] * size
sendv = np.arange(size, dtype="d") + 10 * rank
recvv = np.empty(size)
comm.Alltoallv([sendv, scounts, MPI.DOUBLE], [recvv, scounts, MPI.DOUBLE])
check((recvv == 10 * np.arange(size) + rank).all(), "Alltoallv")

vals = np.array([rank, -rank, 1], dtype="i")
tot = np.empty(3, dtype="i") if rank == 0 else None
comm.Reduce([vals, MPI.INT], [tot, MPI.INT] if rank == 0 else None, op=MPI.SUM, root=0)
s0 = sum(range(size))
check(rank != 0 or (tot == [s0, -s0, size]).all(), "Reduce")
inplace = vals.copy()
comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.MIN)
check((inplace == [0, -(size - 1), 1]).all(), "Allreduce IN_PLACE")
pre = np.empty(3, dtype="i")
comm.Scan(vals, pre, op=MPI.SUM)
check((pre == [rank * (rank + 1) // 2, -rank * (rank + 1) // 2, rank + 1]).all(), "Scan")
ex = np.full(3, -7, dtype="i")
comm.Exscan(vals, ex, op=MPI.SUM)
check(rank == 0 or (ex == [rank * (rank - 1) // 2, -rank * (rank - 1) // 2, rank]).all(),
      "Exscan")
blocks = np.arange(2 * size, dtype="i")
mypart = np.empty(2, dtype="i")
comm.Reduce_scatter_block(blocks, mypart, op=MPI.SUM)
check((mypart == size * np.arange(2 * rank, 2 * rank + 2)).all(), "Reduce_scatter_block")
rs = np.empty(rank + 1, dtype="i")
comm.Reduce_scatter(np.ones(sum(counts), dtype="i"), rs, recvcounts=counts, op=MPI.SUM)
check((rs == size).all(), "Reduce_scatter")


def shear(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype="i8").reshape(2, 2)
    b = np.frombuffer(inoutbuf, dtype="i8").reshape(2, 2)
    b[...] = a @ b


SHEAR = MPI.Op.Create(shear, commute=False)
mat = np.array([[rank + 1, 1], [1, 0]], dtype="i8")
prod = np.empty_like(mat)
comm.Allreduce([mat, MPI.INT64_T], [prod, MPI.INT64_T], op=SHEAR)
expect = np.eye(2, dtype="i8")
for r in range(size):
    expect = expect @ np.array([[r + 1, 1], [1, 0]], dtype="i8")
check((prod == expect).all(), "user buffer op in rank order")
local = np.array([2, 3], dtype="i")
acc = np.array([5, 7], dtype="i")
MPI.PROD.Reduce_local([local, MPI.INT], [acc, MPI.INT])
check((acc == [10, 21]).all(), "Reduce_local")
SHEAR.Free()

# -- non-blocking collectives ---------------------------------------------------------------
nb = np.arange(3, dtype="d") if rank == 0 else np.zeros(3)
nsum, nred = np.empty(3), np.empty(3)
ngat = np.empty(size)
nscan = np.empty(1)
reqs = [comm.Ibarrier(), comm.Ibcast(nb, root=0),
        comm.Iallreduce(np.full(3, float(rank)), nsum, op=MPI.SUM),
        comm.Ireduce(np.full(3, float(rank)), nred if rank == 0 else None, op=MPI.MAX, root=0),
        comm.Iallgather(np.array([float(rank)]), ngat),
        comm.Iscan(np.array([float(rank)]), nscan, op=MPI.SUM)]
MPI.Request.Waitall(reqs)
check((nb == np.arange(3)).all() and (nsum == s0).all(), "Ibcast/Iallreduce")
check(rank != 0 or (nred == size - 1).all(), "Ireduce")
check((ngat == np.arange(size)).all() and nscan[0] == rank * (rank + 1) / 2, "Iallgather/Iscan")
nsc = np.empty(2)
ng = np.empty(2 * size) if rank == 0 else None
na = np.empty(size, dtype="i")
MPI.Request.Waitall([comm.Iscatter(np.arange(2 * size, dtype="d") if rank == 0 else None,
                                   nsc, root=0),
                     comm.Igather(np.full(2, float(rank)), ng, root=0),
                     comm.Ialltoall(np.full(size, rank, dtype="i"), na)])
check((nsc == [2 * rank, 2 * rank + 1]).all() and (na == np.arange(size)).all(),
      "Iscatter/Ialltoall")
check(rank != 0 or (ng == np.repeat(np.arange(size), 2)).all(), "Igather")

# -- communicators and groups ---------------------------------------------------------------
dup = comm.Dup()
check(comm.Compare(dup) == MPI.CONGRUENT and comm.Compare(comm) == MPI.IDENT, "Compare")
check(dup.allreduce(1) == size, "Dup works")
half = comm.Split(color=rank % 2, key=-rank)
check(half.Get_size() == len(range(rank % 2, size, 2)), "Split size")
check(half.allgather(rank) == sorted(range(rank % 2, size, 2), reverse=True), "Split key order")
none = comm.Split(MPI.UNDEFINED, 0)
check(none == MPI.COMM_NULL, "Split UNDEFINED gives COMM_NULL")
shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
names = comm.allgather(MPI.Get_processor_name())
here = shared.allgather(MPI.Get_processor_name())
check(set(here) == {MPI.Get_processor_name()} and
      len(here) == names.count(MPI.Get_processor_name()), "Split_type shared = same host")
group = comm.Get_group()
check(group.Get_size() == size and group.Get_rank() == rank, "Get_group")
evens = group.Incl(list(range(0, size, 2)))
odds = group.Excl(list(range(0, size, 2)))
check(MPI.Group.Union(evens, odds).Get_size() == size, "Union")
check(MPI.Group.Intersection(evens, odds).Get_size() == 0, "Intersection")
check(MPI.Group.Difference(group, odds).Compare(evens) == MPI.IDENT, "Difference")
check(MPI.Group.Translate_ranks(evens, [0], group) == [0], "Translate_ranks")
check(evens.Get_rank() == (rank // 2 if rank % 2 == 0 else MPI.UNDEFINED), "group rank")
made = comm.Create(evens)
check((made == MPI.COMM_NULL) == (rank % 2 == 1), "Create")
if made != MPI.COMM_NULL:
    check(made.allreduce(1) == len(range(0, size, 2)) and made.Get_rank() == rank // 2,
          "Create communicator")
    made.Free()
if rank % 2 == 1:
    only = comm.Create_group(odds, tag=5)
    check(only.allgather(rank) == list(range(1, size, 2)), "Create_group")
    only.Free()
evens.Free()
odds.Free()
group.Free()

key = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: v + 1)
deleted = []
gone = MPI.Comm.Create_keyval(delete_fn=lambda c, k, v: deleted.append(v))
dup.Set_attr(key, 41)
dup.Set_attr(gone, "x")
check(dup.Get_attr(key) == 41 and dup.Get_attr(gone) == "x", "Set_attr/Get_attr")
dup2 = dup.Dup()
check(dup2.Get_attr(key) == 42 and dup2.Get_attr(gone) is None, "attributes copied on Dup")
dup.Delete_attr(gone)
check(deleted == ["x"] and dup.Get_attr(gone) is None, "Delete_attr")
check(MPI.Comm.Free_keyval(key) == MPI.KEYVAL_INVALID, "Free_keyval")
for c in (dup2, dup, half, shared):
    c.Free()
check(dup == MPI.COMM_NULL, "freed communicator is COMM_NULL")

# -- errors ---------------------------------------------------------------------------------
check(raises(MPI.ERR_RANK, lambda: comm.Send(np.zeros(1), dest=size + 3)), "ERR_RANK")
outgoing.append(comm.Isend(np.zeros(8), dest=right, tag=30))
check(raises(MPI.ERR_TRUNCATE, lambda: comm.Recv(np.zeros(2), source=left, tag=30)),
      "ERR_TRUNCATE")
MPI.Request.Waitall(outgoing)
check(issubclass(MPI.Exception, RuntimeError), "MPI.Exception is a RuntimeError")
if coc:
    for name in ("Win", "File", "Intercomm"):
        try:
            getattr(MPI, name)
        except NotImplementedError as exc:
            check(name in str(exc), f"NotImplementedError names MPI.{name}")
        else:
            check(False, f"MPI.{name} should be refused")
comm.Barrier()
print(f"rank {rank}: {checks} checks passed", flush=True)
