"""Sum a NumPy array over every rank, flat and topology-aware, and show the cross-site messages.

Run: ``coc-run -n 8 examples/allreduce.py``. The topology-aware algorithm reduces within
each site first and sends one partial sum per site across the gateways.
"""

import numpy as np

import coc

comm = coc.init()
data = np.full(1000, comm.rank, dtype=np.float64)
total = np.empty_like(data)
for algorithm in ("flat", "topology"):
    comm.barrier()
    before = comm.stats()["inter_site_messages"]
    comm.Allreduce(data, total, op=coc.SUM, algorithm=algorithm)
    crossed = comm.allreduce(comm.stats()["inter_site_messages"] - before)
    assert total[0] == sum(range(comm.size))
    if comm.rank == 0:
        print(f"{algorithm:>8}: sum {total[0]:.0f}, {crossed} messages crossed sites",
              flush=True)
