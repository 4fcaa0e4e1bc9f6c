"""The main job: every rank says where it runs, then the ranks talk across the sites.

Run with ``coc-run -n 8 --tag-output python examples/hello.py`` on the built-in two-sites
topology: ranks 0-3 on site a, 4-7 on site b, and every message between the sites crosses
both gateway daemons (a-gw, b-gw), since the compute hosts of one site cannot reach the other.
"""
import numpy as np

import coc

comm = coc.init()
rank, size = comm.rank, comm.size
print(f"rank {rank} of {size} on site {comm.site}, host {comm.host}", flush=True)

# A token round the ring: rank 3 -> 4 and rank 7 -> 0 cross between the sites.
right, left = (rank + 1) % size, (rank - 1) % size
token = comm.sendrecv(f"greetings from rank {rank} on site {comm.site}", dest=right, source=left)

# A topology-aware allreduce: one exchange between the sites instead of one per rank.
total = np.empty(1)
comm.Allreduce(np.array([rank + 1.0]), total)

sites = comm.gather(comm.site, root=0)
if rank == 0:
    print(f"rank 0 received {token!r}")
    print(f"sum of 1..{size} over {len(set(sites))} sites: {total[0]:.0f} "
          f"(expected {size * (size + 1) // 2})")
    print(f"messages rank 0 sent across the sites: {comm.stats()['inter_site_messages']}")
