"""Jacobi iteration on a 2-D grid split into row blocks: halo rows exchanged with Sendrecv.

The edge ranks exchange with ``MPI.PROC_NULL``; the residual is an ``Allreduce``. Run:
``mpiexec -n 4 python jacobi.py`` or ``coc-run --mpi4py -n 4 python jacobi.py``.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N, STEPS = 64, 50

rows = [N // size + (1 if r < N % size else 0) for r in range(size)]
first = sum(rows[:rank])
u = np.zeros((rows[rank] + 2, N))           # one halo row above and below
if rank == 0:
    u[1, :] = 1.0                             # the hot top edge
up = rank - 1 if rank > 0 else MPI.PROC_NULL
down = rank + 1 if rank < size - 1 else MPI.PROC_NULL

for step in range(STEPS):
    comm.Sendrecv([u[1], MPI.DOUBLE], dest=up, sendtag=1,
                  recvbuf=[u[-1], MPI.DOUBLE], source=down, recvtag=1)
    comm.Sendrecv([u[-2], MPI.DOUBLE], dest=down, sendtag=2,
                  recvbuf=[u[0], MPI.DOUBLE], source=up, recvtag=2)
    new = u.copy()
    new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    if rank == 0:
        new[1, :] = 1.0
    local = np.array([((new[1:-1] - u[1:-1]) ** 2).sum()])
    residual = np.empty(1)
    comm.Allreduce([local, MPI.DOUBLE], [residual, MPI.DOUBLE], op=MPI.SUM)
    u = new

heat = comm.reduce(float(u[1:-1].sum()), op=MPI.SUM, root=0)
if rank == 0:
    print(f"{N}x{N} grid, {STEPS} steps: residual {residual[0]:.6e}, total heat {heat:.6f}")
