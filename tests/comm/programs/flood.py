"""Rank 0 floods rank 1 (the other site) with 64 KiB Sends while rank 1 sleeps (issue 12).

``flood.py SECONDS PID_DIR``: rank 1 sleeps SECONDS, then receives everything; rank 0
sends for SECONDS, then one last message (tag 2) carrying the count. Each rank writes its
pid to PID_DIR/rank.N so a test can sample its memory, and prints one JSON report.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

import coc

comm = coc.init()
seconds, pid_dir = float(sys.argv[1]), Path(sys.argv[2])
(pid_dir / f"rank.{comm.rank}").write_text(str(__import__("os").getpid()))
buf = np.zeros(64 << 10, dtype=np.uint8)
failures = []
if comm.rank == 0:
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        buf[:8] = np.frombuffer(np.int64(count).tobytes(), dtype=np.uint8)
        comm.Send(buf, dest=1, tag=1)
        count += 1
    comm.Send(np.array([count], dtype=np.int64), dest=1, tag=2)
    report = {"sent": count}
else:
    time.sleep(seconds)
    status, count = coc.Status(), 0
    while True:
        comm.Recv(buf, source=0, tag=coc.ANY_TAG, status=status)
        if status.Get_tag() == 2:
            break
        if int(buf[:8].view(np.int64)[0]) != count:
            failures.append(f"message {count} out of order or corrupt")
        count += 1
    sent = int(buf[:8].view(np.int64)[0])
    if sent != count:
        failures.append(f"received {count} of {sent} messages")
    report = {"received": count}
print(json.dumps({"rank": comm.rank, "checked": 1, "failures": failures[:5], **report}), flush=True)
