"""Two ranks trade messages full of a plaintext marker, both ways, and check every byte.

Rank 0 sends each size to rank 1, which sends it back; each prints one JSON line. The
marker lets a capture on the WAN tell whether the payload crossed it readable.
"""

import json
import os
import sys

import coc

MARKER = sys.argv[1].encode()
SIZES = [int(s) for s in sys.argv[2].split(",")]

comm = coc.init()
peer = 1 - comm.rank
for i, size in enumerate(SIZES):
    data = (MARKER + b" %06d " % i + b"." * 60) * (size // (len(MARKER) + 68) + 1)
    data = bytearray(data[:size])
    got = bytearray(size)
    if comm.rank == 0:
        comm.Send(data, peer, tag=i)
        comm.Recv(got, source=peer, tag=i)
    else:
        comm.Recv(got, source=peer, tag=i)
        comm.Send(got, peer, tag=i)
    assert got == data, f"message {i} ({size} bytes) arrived changed"
comm.barrier()
print(json.dumps({"rank": comm.rank, "host": os.environ.get("COC_HOST"), "ok": len(SIZES)}),
      flush=True)
