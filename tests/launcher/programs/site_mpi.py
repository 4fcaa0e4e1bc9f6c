"""A coc rank that passes an object round a ring and says which transport carried what.

Prints one JSON line: rank, size, site, pid, the MPI rank and size it has in its site's MPI
job (None when the site's MPI did not start it), the Slurm job and step it runs in (if any),
what it received, and its message counters. ``site_mpi.py R CODE``: rank R exits with CODE.
"""

import json
import os
import sys

import coc

comm = coc.init()
rank, size = comm.rank, comm.size
mpi = (None, None)
if os.environ.get("COC_SITE_MPI") == "1":
    from mpi4py import MPI
    mpi = (MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size())
if len(sys.argv) > 1 and rank == int(sys.argv[1]):
    sys.exit(int(sys.argv[2]))
comm.send({"from": rank}, (rank + 1) % size, tag=5)
got = comm.recv(source=(rank - 1) % size, tag=5)
print(json.dumps({"rank": rank, "size": size, "site": os.environ["COC_SITE"],
                  "pid": os.getpid(), "mpi": mpi, "got": got, "stats": comm.stats(),
                  "slurm": [os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")]}),
      flush=True)
