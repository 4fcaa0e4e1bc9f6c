"""CPU time per point-to-point operation from Python, which machine load barely moves.

A world of one rank (started directly, no coc-run) sends to itself: ``Send`` + ``Recv`` of
8 B, ``send`` + ``recv`` of a 100-byte dict, the same as one ``Sendrecv``/``sendrecv``
each, the dict by ``irecv`` + ``isend`` + ``wait``, and non-blocking messages of 8 B in
windows of
64 (post 64 ``Irecv`` and 64 ``Isend``, then complete them): by ``Wait`` on each, by one
``Waitall`` over the 128 requests, and by ``Test`` on each until it says done. Each
figure is the calling thread's CPU time (``time.thread_time``) per operation (a message
sent and received), median (min-max) of 5 runs of 5000 operations.

``--mpi`` runs the same with mpi4py (``MPI.COMM_SELF``; the blocking pairs are left out:
MPICH's blocking send to itself does not return), the reference of the exchanges and the
non-blocking figures. Compare two builds of coc by running each with its source tree first on
``PYTHONPATH`` (docs/performance.md).

Run: ``python benchmarks/cpu_per_op.py [--mpi]``.
"""

import argparse
import statistics
import time

import numpy as np

N = 5000
WINDOW = 64
OBJ = {"step": 7, "name": "halo", "value": 3.25, "ids": [1, 2, 3, 4, 5, 6, 7, 8]}


def _bodies(comm, Request, blocking):
    """Return ``{name: (body, operations per body)}``."""
    buf, out = np.zeros(8, np.uint8), np.zeros(8, np.uint8)
    bufs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]
    outs = [np.zeros(8, np.uint8) for _ in range(WINDOW)]
    windows = N // WINDOW

    def post():
        receives = [comm.Irecv(o, 0, 3) for o in outs]
        return [comm.Isend(b, 0, 3) for b in bufs] + receives

    def buffers():
        for _ in range(N):
            comm.Send(buf, 0, 1)
            comm.Recv(out, 0, 1)

    def objects():
        for _ in range(N):
            comm.send(OBJ, 0, 2)
            comm.recv(source=0, tag=2)

    def exchange_buffers():
        for _ in range(N):
            comm.Sendrecv(buf, 0, 4, out, 0, 4)

    def exchange_objects():
        for _ in range(N):
            comm.sendrecv(OBJ, 0, 5, None, 0, 5)

    def objects_nonblocking():
        for _ in range(N):
            r = comm.irecv(None, 0, 6)
            comm.isend(OBJ, 0, 6).wait()
            r.wait()

    def wait_each():
        for _ in range(windows):
            for r in post():
                r.Wait()

    def wait_all():
        for _ in range(windows):
            Request.Waitall(post())

    def test_each():
        for _ in range(windows):
            for r in post():
                while not r.Test():
                    pass

    bodies = {}
    if blocking:
        bodies["Send + Recv, 8 B"] = (buffers, N)
        bodies["send + recv, 100-byte dict"] = (objects, N)
    bodies["Sendrecv, 8 B"] = (exchange_buffers, N)
    bodies["sendrecv, 100-byte dict"] = (exchange_objects, N)
    bodies["irecv + isend + wait, 100-byte dict"] = (objects_nonblocking, N)
    bodies["Irecv + Isend + Wait, window of 64"] = (wait_each, windows * WINDOW)
    bodies["Irecv + Isend + Waitall, window of 64"] = (wait_all, windows * WINDOW)
    bodies["Irecv + Isend + Test, window of 64"] = (test_each, windows * WINDOW)
    return bodies


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpi", action="store_true",
                        help="mpi4py + MPI (COMM_SELF) instead of coc")
    args = parser.parse_args()
    if args.mpi:
        from mpi4py import MPI
        comm, Request, blocking = MPI.COMM_SELF, MPI.Request, False
    else:
        import coc
        comm, Request, blocking = coc.init(), coc.Request, True
    for name, (body, ops) in _bodies(comm, Request, blocking).items():
        body()
        runs = []
        for _ in range(5):
            t0 = time.thread_time()
            body()
            runs.append((time.thread_time() - t0) / ops * 1e6)
        print(f"{name:40} {statistics.median(runs):6.2f} µs ({min(runs):.2f}-{max(runs):.2f})")


if __name__ == "__main__":
    main()
