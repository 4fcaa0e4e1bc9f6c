"""Reductions with predefined and user operations, for objects and buffers.

A non-commutative user op (2x2 matrix product) shows that the rank order is kept. Run:
``mpiexec -n 4 python reductions.py`` or ``coc-run --mpi4py -n 4 python reductions.py``.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def matmul(inbuf, inoutbuf, datatype):
    """inoutbuf = inbuf @ inoutbuf for 2x2 int64 matrices (MPI's user-function form)."""
    a = np.frombuffer(inbuf, dtype=np.int64).reshape(2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.int64).reshape(2, 2)
    b[...] = a @ b


def longest(a, b, datatype):
    """The longer of two strings (the first on a tie)."""
    return a if len(a) >= len(b) else b


MATMUL = MPI.Op.Create(matmul, commute=False)
LONGEST = MPI.Op.Create(longest, commute=True)

mine = np.array([[rank + 1, 1], [1, 0]], dtype=np.int64)   # these do not commute
product = np.empty_like(mine)
comm.Allreduce([mine, MPI.INT64_T], [product, MPI.INT64_T], op=MATMUL)

values = np.array([rank + 1, 10 * rank, -rank], dtype="i")
total, biggest = np.empty_like(values), np.empty_like(values)
comm.Reduce([values, MPI.INT], [total, MPI.INT], op=MPI.SUM, root=0)
comm.Allreduce(values, biggest, op=MPI.MAX)
prefix = np.empty_like(values)
comm.Scan(values, prefix, op=MPI.SUM)
prefixes = comm.gather(prefix.tolist(), root=0)

word = comm.allreduce("x" * (rank % 3 + 1) + str(rank), op=LONGEST)
where = comm.allreduce(((rank - 1.5) ** 2, rank), op=MPI.MINLOC)
before = comm.exscan(rank + 1, op=MPI.PROD)
befores = comm.gather(before, root=0)

block = np.arange(size * 2, dtype="i") * (rank + 1)
part = np.empty(2, dtype="i")
comm.Reduce_scatter_block(block, part, op=MPI.SUM)
parts = comm.gather(part.tolist(), root=0)

MATMUL.Free()
LONGEST.Free()
if rank == 0:
    print(f"product in rank order: {product.tolist()}")
    print(f"sum {total.tolist()}, max {biggest.tolist()}")
    print(f"inclusive scans: {prefixes}")
    print(f"exclusive products: {befores}")
    print(f"longest word: {word}, minloc: {where}")
    print(f"reduce-scatter blocks: {parts}")
