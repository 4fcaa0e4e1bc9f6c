"""Every rank gathers every rank's host across the sites, says so, then holds until released.

While the ranks hold, the test looks at the job from outside (``ss`` in each host's network
namespace). ``HOLD_DIR`` is where each rank writes ``<rank>.json``; the test creates
``release`` there. Every wait is bounded (``HOLD_TIMEOUT`` seconds).
"""

import json
import os
import time
from pathlib import Path

import coc

comm = coc.init()
hosts = comm.allgather(os.environ.get("COC_HOST"))
where = Path(os.environ["HOLD_DIR"])
(where / f"{comm.rank}.json").write_text(json.dumps({"rank": comm.rank, "hosts": hosts}))
deadline = time.monotonic() + float(os.environ.get("HOLD_TIMEOUT", "60"))
while not (where / "release").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
comm.barrier()
print(json.dumps({"rank": comm.rank, "hosts": hosts}), flush=True)
