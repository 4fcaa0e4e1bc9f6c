"""Cross-site traffic with checksums, for fault tests: every round each rank exchanges a
message with its partner on the other site (sizes cycle from 8 B to 1.5 MB: eager and
rendezvous), plays one 8-byte ping-pong, and joins an Allreduce. Every payload carries its
round and sender, so a lost, repeated, reordered or corrupted message is counted. Runs for
``--seconds`` (rank 0 decides, by bcast, so all ranks agree), prints one summary line per
rank and exits 1 on any error.
"""

import argparse
import json
import os
import time

import numpy as np

import coc

SIZES = (8, 1000, 65536, 300_000, 1_500_000)

parser = argparse.ArgumentParser()
parser.add_argument("--pid-dir", help="write <rank>.json with this rank's pids here")
parser.add_argument("--seconds", type=float, default=3.0)
args = parser.parse_args()

comm = coc.init()
rank, size = comm.rank, comm.size
partner = (rank + size // 2) % size
if args.pid_dir:
    path = os.path.join(args.pid_dir, f"{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"rank": rank, "pid": os.getpid(), "agent": os.getppid()}, f)
    os.rename(path + ".tmp", path)


def payload(round_, src):
    buf = np.full(SIZES[round_ % len(SIZES)], (round_ * 7 + src) % 251, dtype=np.uint8)
    head = np.array([round_, src], dtype=np.uint32).view(np.uint8)
    buf[: min(8, buf.size)] = head[: min(8, buf.size)]
    return buf


errors, rounds, start = 0, 0, time.monotonic()
while comm.bcast(time.monotonic() - start < args.seconds if rank == 0 else None):
    out = payload(rounds, rank)
    got = np.empty_like(out)
    comm.Sendrecv(out, partner, rounds % 1000, got, partner, rounds % 1000)
    errors += not np.array_equal(got, payload(rounds, partner))
    ping = np.array([rounds, rank], dtype=np.int64)
    pong = np.empty_like(ping)
    if rank < partner:
        comm.Send(ping, partner, 7)
        comm.Recv(pong, partner, 7)
    else:
        comm.Recv(pong, partner, 7)
        comm.Send(ping, partner, 7)
    errors += pong.tolist() != [rounds, partner]
    total = np.empty(1000)
    comm.Allreduce(np.full(1000, float(rank + rounds)), total)
    errors += not (total == sum(range(size)) + size * rounds).all()
    rounds += 1
print(f"rank {rank}: {rounds} rounds, {errors} errors", flush=True)
raise SystemExit(1 if errors else 0)
