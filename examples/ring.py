"""Pass a token round a ring of ranks, with objects and then with a NumPy buffer.

Run: ``coc-run -n 4 examples/ring.py`` (ranks on both sites of the two-sites topology).
"""

import numpy as np

import coc

comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size

token = comm.sendrecv({"from": rank, "site": comm.site}, dest=right, source=left)
print(f"rank {rank} on site {comm.site} got {token} from rank {left}", flush=True)

buf = np.full(4, rank, dtype=np.float64)
out = np.empty_like(buf)
comm.Sendrecv(buf, dest=right, recvbuf=out, source=left)
assert (out == left).all()
