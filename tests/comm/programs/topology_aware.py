"""Count the messages that cross site boundaries, flat versus topology-aware, per collective.

Prints, on rank 0, one JSON report with ``crossings[op][algorithm]`` summed over all ranks,
and ``seconds[op][algorithm]``: the time of ``repeat`` rounds of (operation, barrier) minus
that of ``repeat`` barriers, per round, on the slowest rank (ranks leave a barrier at
different times, so a single operation cannot be timed alone). argv: repeat, and the
emulated one-way WAN delay in seconds (added to every frame a rank sends its gateway).
"""

import sys

import numpy as np
from checks import Checks

import coc
from coc.comm import counters

comm = coc.init()
rank, size = comm.rank, comm.size
ok = Checks(comm)
repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
wan_delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
for gateway in comm._world.gateways:      # emulate the WAN: delay frames into the gateways
    comm._world.port.set_peer_delay(gateway, wan_delay)
root = 1 % size

operations = {
    "bcast": lambda alg: comm.bcast(np.arange(100) if rank == root else None, root,
                                    algorithm=alg),
    "reduce": lambda alg: comm.reduce(rank, coc.SUM, root, algorithm=alg),
    "allreduce": lambda alg: comm.allreduce(np.full(100, rank), coc.SUM, algorithm=alg),
    "Allreduce": lambda alg: comm.Allreduce(np.full(1000, float(rank)), np.empty(1000),
                                            coc.SUM, algorithm=alg),
    "barrier": lambda alg: comm.barrier(algorithm=alg),
    "gather": lambda alg: comm.gather(rank, root, algorithm=alg),
    "allgather": lambda alg: comm.allgather(rank, algorithm=alg),
    "alltoall": lambda alg: comm.alltoall([(rank, d) for d in range(size)], algorithm=alg),
    "Allgather": lambda alg: comm.Allgather(np.full(4, rank), np.empty(4 * size, int),
                                            algorithm=alg),
    "Alltoall": lambda alg: comm.Alltoall(np.arange(size), np.empty(size, int), algorithm=alg),
}
expected = {"bcast": np.arange(100), "reduce": sum(range(size)) if rank == root else None,
            "allreduce": np.full(100, sum(range(size))), "Allreduce": None, "barrier": None,
            "gather": list(range(size)) if rank == root else None,
            "allgather": list(range(size)), "alltoall": [(s, rank) for s in range(size)],
            "Allgather": None, "Alltoall": None}
crossings, seconds = {}, {}
for name, run in operations.items():
    for algorithm in ("flat", "topology"):
        run(algorithm)                    # the first call builds the site communicators
        comm.barrier(algorithm="flat")
        before = counters["inter_site_messages"]
        result = run(algorithm)
        crossed = counters["inter_site_messages"] - before
        ok.equal(f"{name} {algorithm}", result, expected[name])
        comm.barrier(algorithm="topology")
        start = coc.Wtime()
        for _ in range(repeat):
            comm.barrier(algorithm="topology")
        barriers = coc.Wtime() - start
        start = coc.Wtime()
        for _ in range(repeat):
            run(algorithm)
            comm.barrier(algorithm="topology")
        took = (coc.Wtime() - start - barriers) / repeat
        crossings.setdefault(name, {})[algorithm] = comm.allreduce(crossed, algorithm="flat")
        seconds.setdefault(name, {})[algorithm] = comm.allreduce(took, coc.MAX, algorithm="flat")
comm.barrier()
ok.report(crossings=crossings, seconds=seconds,
          sites=len({comm.site_of(r) for r in range(size)}), wan_delay=wan_delay)
