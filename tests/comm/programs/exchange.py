"""Both sites send each other a large message at the same moment (issue 12, item 0).

Run under coc-run with one rank per site: ``exchange.py REPEATS MIB [MIB ...]``. For each
size, each repetition exchanges MIB MiB both ways twice: Isend + Recv of a NumPy buffer,
then sendrecv of an object holding such an array. Every rank prints one JSON report ({"rank", "checked",
"failures"}) so the test reads the outcome from outside.
"""

import json
import sys

import numpy as np

import coc

comm = coc.init()
rank, peer = comm.rank, 1 - comm.rank
repeats, sizes = int(sys.argv[1]), [int(a) for a in sys.argv[2:]]
failures, checked = [], 0
for mib, rep in ((mib, rep) for mib in sizes for rep in range(repeats)):
    n = mib << 20
    mine = np.full(n, (rank * 31 + rep) % 251, dtype=np.uint8)
    theirs = np.empty(n, dtype=np.uint8)
    req = comm.Isend(mine, dest=peer, tag=rep)
    comm.Recv(theirs, source=peer, tag=rep)
    req.wait()
    want = (peer * 31 + rep) % 251
    if not (theirs[0] == want and theirs[-1] == want and (theirs == want).all()):
        failures.append(f"Isend/Recv {mib} MiB repetition {rep}: wrong bytes")
    got = comm.sendrecv({"rep": rep, "data": mine}, dest=peer, source=peer)
    if got["rep"] != rep or not (got["data"] == want).all():
        failures.append(f"sendrecv {mib} MiB repetition {rep}: wrong object")
    checked += 2
print(json.dumps({"rank": rank, "checked": checked, "failures": failures}), flush=True)
