"""An mpi4py program as users write it; under coc-run without --mpi4py it must be stopped."""

from mpi4py import MPI

print(f"rank {MPI.COMM_WORLD.Get_rank()} of {MPI.COMM_WORLD.Get_size()}")
