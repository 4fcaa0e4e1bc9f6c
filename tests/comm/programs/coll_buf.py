"""Buffer collectives checked against locally computed answers: dtypes, sizes, roots, algorithms."""

import numpy as np
from checks import Checks

import coc
from coc.comm import IN_PLACE

comm = coc.init()
rank, size = comm.rank, comm.size
ok = Checks(comm)
roots = sorted({0, size - 1, size // 2})


def data(r, n, dtype):
    return ((np.arange(n) % 11) + r + 1).astype(dtype)


reductions = {"SUM": (coc.SUM, np.add), "PROD": (coc.PROD, np.multiply),
              "MIN": (coc.MIN, np.minimum), "MAX": (coc.MAX, np.maximum)}
for algorithm in ("flat", "topology"):
    tag = f"[{algorithm}]"
    comm.Barrier(algorithm=algorithm)
    for dtype in ("f8", "i4", "u1"):
        for n in (1, 1000, 100_000):
            for root in roots:
                buf = data(root, n, dtype) if rank == root else np.zeros(n, dtype)
                comm.Bcast(buf, root, algorithm=algorithm)
                ok.equal(f"{tag} Bcast {dtype} n={n} root={root}", buf, data(root, n, dtype))
                out = np.zeros(n, dtype)
                comm.Reduce(data(rank, n, dtype), out, coc.SUM, root, algorithm=algorithm)
                if rank == root:
                    expected = np.sum([data(r, n, dtype) for r in range(size)], axis=0,
                                      dtype=dtype)
                    ok.equal(f"{tag} Reduce {dtype} n={n} root={root}", out, expected)
            for name, (op, ufunc) in reductions.items():
                out = np.zeros(n, dtype)
                comm.Allreduce(data(rank, n, dtype), out, op, algorithm=algorithm)
                expected = data(0, n, dtype)
                for r in range(1, size):
                    expected = ufunc(expected, data(r, n, dtype)).astype(dtype)
                ok.equal(f"{tag} Allreduce {name} {dtype} n={n}", out, expected)
    bits = np.array([1 << rank, 0xFF ^ (1 << rank)], dtype="i8")
    both = np.zeros(2, "i8")
    comm.Allreduce(bits[:1], both[:1], coc.BOR, algorithm=algorithm)
    comm.Allreduce(bits[1:], both[1:], coc.BAND, algorithm=algorithm)
    ok.equal(f"{tag} BOR/BAND", both, np.array([(1 << size) - 1, 0xFF ^ ((1 << size) - 1)]))
    flags = np.array([rank != 1, rank == 1])
    land, lor = np.zeros(1, bool), np.zeros(1, bool)
    comm.Allreduce(flags[:1], land, coc.LAND, algorithm=algorithm)
    comm.Allreduce(flags[1:], lor, coc.LOR, algorithm=algorithm)
    ok.equal(f"{tag} LAND/LOR", (bool(land[0]), bool(lor[0])), (size == 1, size > 1))
    pair = np.dtype([("value", "f8"), ("index", "i4")])
    mine = np.array([((rank * 7) % 5, rank)], dtype=pair)
    best = np.zeros(1, pair)
    comm.Allreduce(mine, best, coc.MAXLOC, algorithm=algorithm)
    values = [(r * 7) % 5 for r in range(size)]
    ok.equal(f"{tag} MAXLOC", (best["value"][0], best["index"][0]),
             (max(values), values.index(max(values))))
    inplace = data(rank, 10, "f8")
    comm.Allreduce(IN_PLACE, inplace, coc.SUM, algorithm=algorithm)
    ok.equal(f"{tag} Allreduce IN_PLACE", inplace,
             np.sum([data(r, 10, "f8") for r in range(size)], axis=0))

# Gather/Scatter/Allgather/Alltoall and the vector forms.
for root in roots:
    n = 3
    out = np.zeros(n * size, "i4")
    comm.Gather(data(rank, n, "i4"), out, root)
    if rank == root:
        ok.equal(f"Gather root={root}", out,
                 np.concatenate([data(r, n, "i4") for r in range(size)]))
    send = np.arange(n * size, dtype="f8") if rank == root else None
    piece = np.zeros(n)
    comm.Scatter(send, piece, root)
    ok.equal(f"Scatter root={root}", piece, np.arange(n * rank, n * rank + n, dtype="f8"))
    counts = [r + 1 for r in range(size)]
    displs = [int(sum(counts[:r])) for r in range(size)]
    out = np.zeros(sum(counts), "f4")
    comm.Gatherv(np.full(rank + 1, rank, "f4"), [out, counts, displs, "f4"], root)
    if rank == root:
        ok.equal(f"Gatherv root={root}", out,
                 np.concatenate([np.full(r + 1, r, "f4") for r in range(size)]))
    send = np.concatenate([np.full(r + 1, r * 10, "i8") for r in range(size)])
    piece = np.zeros(rank + 1, "i8")
    comm.Scatterv([send, counts] if rank == root else None, piece, root)
    ok.equal(f"Scatterv root={root}", piece, np.full(rank + 1, rank * 10, "i8"))
for algorithm in ("flat", "topology"):
    tag = f"[{algorithm}]"
    out = np.zeros(2 * size, "u1")
    comm.Allgather(np.full(2, rank, "u1"), out, algorithm=algorithm)
    ok.equal(f"{tag} Allgather", out, np.repeat(np.arange(size, dtype="u1"), 2))
    counts = [r % 3 for r in range(size)]
    out = np.zeros(sum(counts))
    comm.Allgatherv(np.full(counts[rank], float(rank)), [out, counts], algorithm=algorithm)
    ok.equal(f"{tag} Allgatherv", out,
             np.concatenate([np.full(c, float(r)) for r, c in enumerate(counts)]))
    send = np.array([rank * 100 + d for d in range(size)], "i4")
    out = np.zeros(size, "i4")
    comm.Alltoall(send, out, algorithm=algorithm)
    ok.equal(f"{tag} Alltoall", out, np.array([s * 100 + rank for s in range(size)], "i4"))
    scounts = [d + 1 for d in range(size)]
    rcounts = [rank + 1] * size
    send = np.concatenate([np.full(d + 1, rank * 10 + d, "f8") for d in range(size)])
    out = np.zeros(sum(rcounts))
    comm.Alltoallv([send, scounts], [out, rcounts], algorithm=algorithm)
    ok.equal(f"{tag} Alltoallv", out, np.concatenate([np.full(rank + 1, s * 10 + rank, "f8")
                                                      for s in range(size)]))
    out = np.zeros(3 * size, "i2")
    comm.Gather(np.full(3, rank, "i2"), out, size - 1, algorithm=algorithm)
    if rank == size - 1:
        ok.equal(f"{tag} Gather", out, np.repeat(np.arange(size, dtype="i2"), 3))
out, mine = np.zeros(4), np.full(4, rank + 1.0)
comm.Scan(mine, out)
ok.equal("Scan", out, np.full(4, float(sum(range(1, rank + 2)))))
ok.equal("Scan leaves sendbuf", mine, np.full(4, rank + 1.0))
mine, out = np.arange(6.0).reshape(2, 3) + rank, np.zeros((2, 3))
comm.Allreduce(mine, out)
ok.equal("Allreduce 2-D", out, np.arange(6.0).reshape(2, 3) * size + sum(range(size)))
ok.equal("Allreduce leaves sendbuf", mine, np.arange(6.0).reshape(2, 3) + rank)
comm.Reduce(mine, out if rank == 0 else None, coc.MAX, 0)
if rank == 0:
    ok.equal("Reduce 2-D", out, np.arange(6.0).reshape(2, 3) + size - 1)
out = np.full(4, -1.0)
comm.Exscan(np.full(4, rank + 1.0), out)
ok.equal("Exscan", out, np.full(4, float(sum(range(1, rank + 1))) if rank else -1.0))

sums, grid = np.zeros(100_000), np.arange(12.0).reshape(3, 4) if rank == 0 else np.zeros((3, 4))
reqs = [comm.Iallreduce(np.full(100_000, float(rank)), sums), comm.Ibcast(grid, 0),
        comm.Ibarrier()]
comm.Allreduce(np.ones(3), np.empty(3))
coc.Request.Waitall(reqs)
ok.equal("Iallreduce", sums, np.full(100_000, float(sum(range(size)))))
ok.equal("Ibcast", grid, np.arange(12.0).reshape(3, 4))
comm.Barrier()
ok.report()
