"""Print where each rank runs and whether a ring crossed sites (coc only), for test_mode.py."""

from mpi4py import MPI

import coc.mpi4py

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
token = comm.sendrecv(rank, dest=(rank + 1) % size, source=(rank - 1) % size)
ours = coc.mpi4py.coc_communicator(comm)
half = comm.Split(rank // 2)            # two ranks of one site: through its MPI if it has one
half.allreduce(rank)
stats = ours.stats()
rows = comm.gather((rank, MPI.Get_processor_name(), ours.site, stats["inter_site_messages"],
                    stats.get("site_mpi_messages", 0)), root=0)
if rank == 0:
    for row in rows:
        print("rank {} host {} site {} inter-site messages {} site MPI messages {}".format(*row))
