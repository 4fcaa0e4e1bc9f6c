"""Ping-pong of byte buffers between ranks 0 and 1 with ``[buf, MPI.BYTE]``, 1 B to 1 MiB.

Run: ``mpiexec -n 2 python pingpong.py`` or ``coc-run --mpi4py -n 2 python pingpong.py``
(one rank per site). Checks every byte; prints what it checked, not times.
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
peer = 1 if size > 1 else 0
REPEATS = 5

for shift in range(0, 21, 4):
    n = 1 << shift
    out = (np.arange(n) % 251).astype(np.uint8)
    back = np.empty(n, dtype=np.uint8)
    status = MPI.Status()
    for _ in range(REPEATS):
        if rank == 0:
            sent = comm.Isend([out, MPI.BYTE], dest=peer, tag=n % 32768)
            comm.Recv([back, MPI.BYTE], source=peer, tag=n % 32768, status=status)
            sent.Wait()
            assert status.Get_source() == peer and status.Get_count(MPI.BYTE) == n
            assert (back == out).all()
        elif rank == 1:
            comm.Recv([back, MPI.BYTE], source=0, tag=n % 32768)
            comm.Send([back, MPI.BYTE], dest=0, tag=n % 32768)
    if rank == 0:
        print(f"{n} bytes: {REPEATS} round trips, {status.Get_count(MPI.BYTE)} bytes back, "
              f"{status.Get_count(MPI.DOUBLE)} doubles' worth")
