"""CPU time per point-to-point operation from Python, which machine load barely moves.

A world of one rank (started directly, no coc-run) sends to itself: ``Send`` + ``Recv`` of
8 B, ``send`` + ``recv`` of a 100-byte dict, and ``Irecv`` + ``Isend`` + ``Wait`` per message
of windows of 64. Each figure is the calling thread's CPU time (``time.thread_time``) per
operation, median (min-max) of 5 runs of 5000 operations. Compare two builds by running
each with its source tree first on ``PYTHONPATH`` (docs/performance.md).

Run: ``python benchmarks/cpu_per_op.py``.
"""

import statistics
import time

import numpy as np

import coc

N = 5000
WINDOW = 64


def main():
    comm = coc.init()
    buf, out = np.zeros(8, np.uint8), np.zeros(8, np.uint8)
    obj = {"step": 7, "name": "halo", "value": 3.25, "ids": [1, 2, 3, 4, 5, 6, 7, 8]}
    bufs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]
    outs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]

    def buffers():
        for _ in range(N):
            comm.Send(buf, 0, 1)
            comm.Recv(out, 0, 1)

    def objects():
        for _ in range(N):
            comm.send(obj, 0, 2)
            comm.recv(source=0, tag=2)

    def windows():
        for _ in range(N // WINDOW):
            receives = [comm.Irecv(o, 0, 3) for o in outs]
            sends = [comm.Isend(b, 0, 3) for b in bufs]
            for r in sends + receives:
                r.Wait()

    for name, body, ops in (("Send + Recv, 8 B", buffers, N),
                            ("send + recv, 100-byte dict", objects, N),
                            ("Irecv + Isend + Wait, window of 64", windows,
                             N // WINDOW * WINDOW)):
        body()
        runs = []
        for _ in range(5):
            t0 = time.thread_time()
            body()
            runs.append((time.thread_time() - t0) / ops * 1e6)
        print(f"{name:36} {statistics.median(runs):6.2f} µs ({min(runs):.2f}-{max(runs):.2f})")


if __name__ == "__main__":
    main()
