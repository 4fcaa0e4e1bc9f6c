"""Write one line of ``--mib`` MiB without a newline, in 1 MiB pieces (the rank stays small)."""

import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--mib", type=int, default=200)
args = parser.parse_args()
piece = bytes(range(256)) * 4096            # 1 MiB, every byte value, no newline... almost
piece = piece.replace(b"\n", b"n")
for _ in range(args.mib):
    view = memoryview(piece)
    while view:
        view = view[os.write(1, view):]
