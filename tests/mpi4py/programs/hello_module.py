"""A module run as ``python -m mpi4py -m hello_module``: every rank reports to rank 0."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
names = comm.gather(f"{__name__}:{comm.Get_rank()}", root=0)
if comm.Get_rank() == 0:
    print(f"{comm.Get_size()} ranks: {names}")
