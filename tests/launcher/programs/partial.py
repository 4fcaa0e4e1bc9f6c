"""Write lines in small pieces with pauses, so pieces of different ranks interleave."""

import os
import sys
import time

rank = os.environ["COC_RANK"]
for i in range(5):
    for piece in (f"r{rank}-", f"line{i}-", "piece", "s\n"):
        sys.stdout.write(piece)
        sys.stdout.flush()
        time.sleep(0.01)
sys.stdout.write(f"r{rank}-tail-without-newline")
sys.stdout.flush()
