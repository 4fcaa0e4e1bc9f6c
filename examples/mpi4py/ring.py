"""A token goes round a ring of ranks: objects with send/recv, then buffers with Sendrecv.

An unmodified mpi4py program: ``mpiexec -n 4 python ring.py`` or, across two sites,
``coc-run --mpi4py -n 4 python ring.py``; both print the same lines.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# an object token: every rank appends its number
if rank == 0:
    req = comm.isend([0], dest=right, tag=7)
    token = comm.recv(source=left, tag=7)
    req.wait()
else:
    token = comm.recv(source=left, tag=7)
    token.append(rank)
    comm.send(token, dest=right, tag=7)

# a buffer ring: each rank passes its number to the right
sendbuf = np.array([rank], dtype="i")
recvbuf = np.empty(1, dtype="i")
comm.Sendrecv([sendbuf, MPI.INT], dest=right, sendtag=1,
              recvbuf=[recvbuf, MPI.INT], source=left, recvtag=1)
got = comm.gather(int(recvbuf[0]), root=0)

if rank == 0:
    print(f"object token after one round: {token}")
    print(f"rank r received {got} from rank r-1")
