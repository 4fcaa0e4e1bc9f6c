"""Every rank gathers, over the job, where each rank runs: site, Slurm job, partition, node.

Rank 0 prints it as one JSON line (the gather crosses the sites' gateways).
"""

import json
import os

import coc

comm = coc.init()
where = comm.allgather({"site": os.environ.get("COC_SITE"),
                        "job": os.environ.get("SLURM_JOB_ID"),
                        "partition": os.environ.get("SLURM_JOB_PARTITION"),
                        "node": os.environ.get("SLURMD_NODENAME")})
if comm.rank == 0:
    print(json.dumps(where), flush=True)
