"""Object collectives checked against locally computed answers: roots, sizes, ops, algorithms."""

import functools

import numpy as np
from checks import Checks

import coc

comm = coc.init()
rank, size = comm.rank, comm.size
ok = Checks(comm)
roots = sorted({0, size - 1, size // 2})


def value(r, n):
    """What rank ``r`` contributes for size ``n`` (an array beyond the in-band limit)."""
    return {"r": r, "a": np.arange(n, dtype=np.int64) * (r + 1)}


def fold(op, items):
    return functools.reduce(op, items)


for algorithm in ("flat", "topology", "auto"):
    tag = f"[{algorithm}]"
    comm.barrier(algorithm=algorithm)
    for n in (1, 5000, 200_000):
        for root in roots:
            got = comm.bcast(value(root, n) if rank == root else None, root, algorithm=algorithm)
            ok.equal(f"{tag} bcast n={n} root={root}", got, value(root, n))
            got = comm.gather(value(rank, n), root, algorithm=algorithm)
            ok.equal(f"{tag} gather n={n} root={root}", got,
                     [value(r, n) for r in range(size)] if rank == root else None)
            arr = comm.reduce(np.arange(n) * rank, coc.SUM, root, algorithm=algorithm)
            ok.equal(f"{tag} reduce n={n} root={root}", arr,
                     np.arange(n) * sum(range(size)) if rank == root else None)
        ok.equal(f"{tag} allgather n={n}", comm.allgather(value(rank, n), algorithm=algorithm),
                 [value(r, n) for r in range(size)])
        ok.equal(f"{tag} alltoall n={n}",
                 comm.alltoall([(rank, d, np.full(n // size, d)) for d in range(size)],
                               algorithm=algorithm),
                 [(s, rank, np.full(n // size, rank)) for s in range(size)])
    ops = {"SUM": (coc.SUM, lambda r: r + 1), "PROD": (coc.PROD, lambda r: r + 1),
           "MIN": (coc.MIN, lambda r: (r * 7) % 5), "MAX": (coc.MAX, lambda r: (r * 7) % 5),
           "LAND": (coc.LAND, lambda r: r != 3), "LOR": (coc.LOR, lambda r: r == 2),
           "BAND": (coc.BAND, lambda r: 0xFF ^ (1 << r)), "BOR": (coc.BOR, lambda r: 1 << r),
           "MINLOC": (coc.MINLOC, lambda r: ((r * 7) % 5, r)),
           "MAXLOC": (coc.MAXLOC, lambda r: ((r * 7) % 5, r))}
    for name, (op, contribution) in ops.items():
        expected = fold(op, [contribution(r) for r in range(size)])
        ok.equal(f"{tag} allreduce {name}",
                 comm.allreduce(contribution(rank), op, algorithm=algorithm), expected)
    concat = coc.Op.Create(lambda a, b: a + b, commute=False)
    ok.equal(f"{tag} allreduce user non-commutative",
             comm.allreduce([rank], concat, algorithm=algorithm), list(range(size)))
    ok.equal(f"{tag} reduce user function root", comm.reduce(
        str(rank), lambda a, b: a + b, root=size - 1, algorithm=algorithm),
        "".join(map(str, range(size))) if rank == size - 1 else None)

for root in roots:
    items = [("item", i) for i in range(size)] if rank == root else None
    ok.equal(f"scatter root={root}", comm.scatter(items, root), ("item", rank))
ok.equal("scan", comm.scan(rank + 1), sum(range(1, rank + 2)))
ok.equal("exscan", comm.exscan(rank + 1), sum(range(1, rank + 1)) if rank else None)
ok.equal("scan user", comm.scan([rank], coc.Op.Create(lambda a, b: a + b)),
         list(range(rank + 1)))

# Sites interleaved in rank order (a a b b a a b b for 8 ranks): the multi-level algorithms
# must map ranks to sites and back.
mixed = comm.Split(0, key=(rank % 2) * size + rank)
mr, ms = mixed.rank, mixed.size
for algorithm in ("flat", "topology"):
    tag = f"[mixed {algorithm}]"
    for root in sorted({0, ms - 1, ms // 2}):
        ok.equal(f"{tag} bcast root={root}", mixed.bcast(("b", root) if mr == root else None,
                                                          root, algorithm=algorithm),
                 ("b", root))
        ok.equal(f"{tag} gather root={root}", mixed.gather(mr, root, algorithm=algorithm),
                 list(range(ms)) if mr == root else None)
        ok.equal(f"{tag} reduce root={root}", mixed.reduce(mr, coc.SUM, root,
                                                           algorithm=algorithm),
                 sum(range(ms)) if mr == root else None)
    ok.equal(f"{tag} allgather", mixed.allgather(mr, algorithm=algorithm), list(range(ms)))
    ok.equal(f"{tag} alltoall", mixed.alltoall([(mr, d) for d in range(ms)],
                                               algorithm=algorithm),
             [(s, mr) for s in range(ms)])
    ok.equal(f"{tag} allreduce", mixed.allreduce(mr, coc.MAX, algorithm=algorithm), ms - 1)
    mixed.barrier(algorithm=algorithm)

# Non-blocking collectives: several in flight with a blocking one between, completed in
# reverse order of starting.
reqs = [comm.iallreduce(rank), comm.ibcast(("nb", 0) if rank == 0 else None, 0),
        comm.iallgather(rank), comm.ibarrier(), comm.ialltoall([(rank, d) for d in range(size)]),
        comm.igather(np.full(5000, rank), size - 1), comm.ireduce([rank], coc.Op.Create(
            lambda a, b: a + b), size // 2)]
ok.equal("blocking between non-blocking", comm.allreduce(2), 2 * size)
results = coc.waitall(reqs[::-1])[::-1]
ok.equal("non-blocking collectives", results[:5],
         [sum(range(size)), ("nb", 0), list(range(size)), None,
          [(s, rank) for s in range(size)]])
ok.equal("igather", results[5], [np.full(5000, r) for r in range(size)]
         if rank == size - 1 else None)
ok.equal("ireduce rank order", results[6], list(range(size)) if rank == size // 2 else None)

# Mismatched roots and lengths give a clear error on some rank (checked in test_errors).
comm.barrier()
ok.report()
