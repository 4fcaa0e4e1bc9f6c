"""Communicator checks: Dup, Split, Split_level, contexts kept apart, sites, hosts, colors."""

import os
import socket

from checks import Checks

import coc

comm = coc.COMM_WORLD
rank, size = comm.rank, comm.size
ok = Checks(comm)

ok.equal("Get_rank/Get_size", (comm.Get_rank(), comm.Get_size()), (rank, size))
ok.equal("rank from the launcher", rank, int(os.environ.get("COC_RANK", os.environ["PMI_RANK"])))
ok.equal("site and host", (comm.site, comm.host),
         (os.environ["COC_SITE"], os.environ.get("COC_HOST", socket.gethostname())))
placement = comm.allgather((comm.site, comm.host))
ok.equal("site_of/host_of", [(comm.site_of(r), comm.host_of(r)) for r in range(size)], placement)
ok.equal("site color", comm.color("site"), 0 if comm.site == "a" else 1)
ok.equal("colors", sorted(comm.colors()), ["host", "network", "site", "wan"])

# Dup: same ranks, own contexts: a message on the dup is not received on the parent.
dup = comm.Dup()
ok.equal("Dup ranks", (dup.rank, dup.size), (rank, size))
right, left = (rank + 1) % size, (rank - 1) % size
dup.isend("on dup", right, tag=1)
comm.isend("on world", right, tag=1)
ok.equal("world first", comm.recv(source=left, tag=1), "on world")
ok.equal("dup second", dup.recv(source=left, tag=1), "on dup")
ok.equal("dup collective", dup.allreduce(rank), sum(range(size)))

# Split by parity, keys reversing the order.
half = comm.Split(rank % 2, key=-rank)
members = [r for r in range(size) if r % 2 == rank % 2]
ok.equal("Split size", half.size, len(members))
ok.equal("Split rank by key", half.rank, sorted(members, reverse=True).index(rank))
ok.equal("Split allgather", half.allgather(rank), sorted(members, reverse=True))
ok.equal("Split UNDEFINED", comm.Split(coc.UNDEFINED if rank else 0, 0) is None, rank != 0)

# Split_level("site") gives the ranks of this site; "host" those of this host.
site = comm.Split_level("site")
ok.equal("Split_level site", site.allgather(rank),
         [r for r in range(size) if placement[r][0] == comm.site])
host = comm.Split_level("host")
ok.equal("Split_level host", host.allgather(rank),
         [r for r in range(size) if placement[r] == (comm.site, comm.host)])
ok.equal("sub-communicator sites", set(site.allgather(site.site)), {comm.site})

# Nested: a Dup of a Split, then Free; traffic of siblings never mixes.
inner = site.Dup()
ok.equal("nested bcast", inner.bcast(("root", inner.rank) if inner.rank == 0 else None),
         ("root", 0))
inner.Free()
half.Free()
ok.equal("world still fine", comm.allreduce(1), size)
ok.true("Wtime", coc.Wtime() > 0)
comm.barrier()
ok.report()
