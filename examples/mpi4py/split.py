"""Split the world by color: even and odd ranks, each ordered backwards by key.

Run: ``mpiexec -n 4 python split.py`` or ``coc-run --mpi4py -n 4 python split.py``.
"""

from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()

color = rank % 2
half = world.Split(color=color, key=-rank)
members = half.allgather(rank)
total = half.allreduce(rank, op=MPI.SUM)
head = half.bcast(rank if half.Get_rank() == 0 else None, root=0)

group = half.Get_group()
in_world = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world.Get_group())
assert in_world == members, (in_world, members)
group.Free()

nobody = world.Split(color=MPI.UNDEFINED if rank else 0, key=0)
assert (nobody == MPI.COMM_NULL) == (rank != 0)

rows = world.gather((color, half.Get_rank(), half.Get_size(), members, total, head), root=0)
if rank == 0:
    for row in sorted(rows):
        print("color {} rank {} of {}: members {} sum {} head {}".format(*row))
half.Free()
if nobody != MPI.COMM_NULL:
    nobody.Free()
