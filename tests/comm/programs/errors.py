"""Error cases, one per mode (argv[1]): mismatched collectives, lost peers, restricted pickles."""

import os
import pickle
import sys
import time

import numpy as np
from checks import Checks

import coc
from coc.errors import PeerLost

comm = coc.init()
rank, size = comm.rank, comm.size
ok = Checks(comm)
mode = sys.argv[1]


class Custom:
    """A class the restricted unpickler must refuse."""

    def __eq__(self, other):
        return isinstance(other, Custom)


if mode == "root":                  # rank 0 believes the root is 0, every other rank 1
    comm.bcast("x", root=0 if rank == 0 else 1)
elif mode == "count":               # rank 0 reduces 4 numbers, the others 5
    comm.Allreduce(np.ones(4 if rank == 0 else 5), np.empty(4 if rank == 0 else 5))
elif mode == "abort":               # one rank aborts the job while the others wait for it
    if rank == size - 1:
        comm.Abort(3)
    comm.recv(source=size - 1)
elif mode == "kind":                # rank 0 calls gather where the others call bcast
    if rank == 0:
        comm.gather("x", root=1)
    else:
        comm.bcast("x", root=1)
elif mode in ("lost", "lost-silent"):   # the last rank dies; rank 0 waits for it, no hang
    if mode == "lost" and rank in (0, size - 1):     # they have talked before
        comm.sendrecv(rank, size - 1 - rank, source=size - 1 - rank)
    if rank == size - 1:
        time.sleep(0.5)
        os._exit(0)
    if rank == 0:
        start = time.monotonic()
        exc = ok.raises("lost peer", PeerLost, comm.recv, source=size - 1, tag=1)
        ok.true("names the rank", exc is not None and f"rank {size - 1}" in str(exc))
        ok.report(seconds=time.monotonic() - start)
        for other in range(1, size - 1):
            comm.send("done", other, tag=2)
    else:                           # the others stay until rank 0 is done (see requests.md)
        comm.recv(source=0, tag=2)
    os._exit(0)
elif mode == "unpickle":            # rank 0 (site a) sends to every rank; same site is trusted
    coc.comm.set_unpickler("restricted")
    if rank == 0:
        for dest in range(1, size):
            comm.send(Custom(), dest, tag=1)
            comm.send({"a": np.arange(10_000), "t": (1, "x", 2.5, None)}, dest, tag=2)
    else:
        foreign = comm.site_of(0) != comm.site
        if foreign:
            ok.raises("class refused", pickle.UnpicklingError, comm.recv, source=0, tag=1)
        else:
            ok.equal("same site trusted", comm.recv(source=0, tag=1), Custom())
        got = comm.recv(source=0, tag=2)
        ok.equal("arrays allowed", got, {"a": np.arange(10_000), "t": (1, "x", 2.5, None)})
    comm.barrier()
    ok.true("ran", True)
    ok.report()
