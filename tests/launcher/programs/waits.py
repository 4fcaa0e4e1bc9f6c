"""Ranks that wait on purpose: a real hang, a late sender, a rank that exits early.

``--mode hang``: every rank blocks in ``Recv`` from the next rank (nobody sends).
``--mode late``: rank 0 receives from rank 1, which sleeps ``--sleep`` seconds first.
``--mode flood``: rank 1 sends 64 MiB and a small message behind its envelope; rank 0
receives the small one (so the envelope is already here), then posts the receive of the
64 MiB, whose answer leaves at once from that call, and stops itself (SIGSTOP) right after:
the bytes fill the queues on the way. Had it posted the receive first and stopped after the
small message, a slow wake-up (a loaded machine) could let all 64 MiB arrive first. (A flood
of eager sends would not fill them: past its credit a sender waits for the receiver.)
``--mode exit``: rank 0 exits at once (code 0, after sending ``--send-first`` messages);
the others sleep ``--sleep`` seconds, receive those messages, then one more that never comes.
"""

import argparse
import os
import signal
import sys
import time

import numpy as np

import coc

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["hang", "late", "flood", "exit"], required=True)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--send-first", type=int, default=0)
args = parser.parse_args()

comm = coc.init()
buf = np.zeros(4, dtype=np.int64)
if args.mode == "hang":
    comm.Recv(buf, source=(comm.rank + 1) % comm.size, tag=7)
elif args.mode == "late":
    if comm.rank == 0:
        comm.Recv(buf, source=1, tag=7)
        print("received", int(buf[0]), flush=True)
    elif comm.rank == 1:
        time.sleep(args.sleep)
        comm.Send(np.full(4, 42, dtype=np.int64), dest=0, tag=7)
elif args.mode == "flood":
    big = np.ones(64 << 20, dtype=np.uint8)
    if comm.rank == 0:
        comm.Recv(buf, source=1, tag=4)          # behind the envelope: it is here
        comm.Irecv(big, source=1, tag=3)         # matches it: the answer leaves now
        os.kill(os.getpid(), signal.SIGSTOP)
    elif comm.rank == 1:
        req = comm.Isend(big, dest=0, tag=3)
        comm.Send(buf, dest=0, tag=4)
        req.Wait()
elif comm.rank == 0:
    for i in range(args.send_first):
        comm.Send(np.full(4, i, dtype=np.int64), dest=1, tag=7)
    sys.exit(0)
else:
    time.sleep(args.sleep)
    for i in range(args.send_first if comm.rank == 1 else 0):
        comm.Recv(buf, source=0, tag=7)
        print(f"rank {comm.rank} got {int(buf[0])}", flush=True)
    comm.Recv(buf, source=0, tag=7)
    print("not reached", flush=True)
