"""Rank the elements of a distributed linked list by pointer jumping, with all-to-all exchanges.

The graph kernel of the LAMP cluster paper (Gołębiewski et al.): a singly linked list of
``N = n * ranks`` elements is stored in an array spread evenly over the ranks, in random
order, and each element must learn how many elements follow it. Pointer jumping (Wyllie's
algorithm) doubles every element's reach each round: an element asks its successor's owner
for the successor's distance and successor, adds the one and jumps to the other, so after
``ceil(log2 N)`` rounds every element points at the tail and holds its rank. Every round is
two ``Alltoallv`` exchanges of NumPy buffers (requests, then answers), the pattern whose
``3 (p-1) log N`` start-ups the paper counts; coc's multi-level ``Alltoallv`` bundles all
that one site sends to the other into one message per round and direction.

It checks itself: rank 0 builds the list from a random permutation, so it knows every
element's true rank and scatters it beside the list; the run is verified when every element's
computed rank equals it.

Run: ``coc-run -n 8 python examples/list_ranking.py`` (10 000 elements per rank; CI size).
Real size (the paper's): ``coc-run -n 8 python examples/list_ranking.py --n 1000000``.
"""

import argparse
import json
import sys

import numpy as np

import coc


class Stopwatch:
    """Add up the seconds spent inside ``with stopwatch:`` blocks (the communication calls)."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.started = coc.Wtime()

    def __exit__(self, *exc):
        self.seconds += coc.Wtime() - self.started


def random_list(total, seed):
    """Return ``(successor, rank)`` arrays of a random list of ``total`` elements.

    The tail is its own successor; an element's rank is the number of elements after it.
    """
    order = np.random.default_rng(seed).permutation(total)
    successor, truth = np.empty(total, np.int64), np.empty(total, np.int64)
    successor[order[:-1]] = order[1:]
    successor[order[-1]] = order[-1]
    truth[order] = np.arange(total - 1, -1, -1)
    return successor, truth


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="list elements per rank")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()

    comm = coc.init()
    rank, size, n = comm.rank, comm.size, args.n
    successor, truth = random_list(n * size, args.seed) if rank == 0 else (None, None)
    succ, expected = np.empty(n, np.int64), np.empty(n, np.int64)
    comm.Scatter(successor, succ, root=0)
    comm.Scatter(truth, expected, root=0)
    del successor, truth

    mine = np.arange(rank * n, (rank + 1) * n)
    distance = (succ != mine).astype(np.int64)
    active = np.flatnonzero(distance)            # all but the tail (its own successor)
    send_counts, recv_counts = np.empty(size, np.int64), np.empty(size, np.int64)
    clock = Stopwatch()
    rounds = 0

    comm.Barrier()
    start = coc.Wtime()
    while True:
        with clock:
            remaining = comm.allreduce(len(active))
        if not remaining:
            break
        rounds += 1
        targets = succ[active]
        owners = targets // n
        by_owner = np.argsort(owners, kind="stable")
        active, targets = active[by_owner], targets[by_owner]
        send_counts[:] = np.bincount(owners, minlength=size)
        with clock:
            comm.Alltoall(send_counts, recv_counts)
            asked = np.empty(recv_counts.sum(), np.int64)
            comm.Alltoallv([targets, send_counts], [asked, recv_counts])
        local = asked - rank * n
        answers = np.column_stack((distance[local], succ[local])).reshape(-1)
        replies = np.empty(2 * len(active), np.int64)
        with clock:
            comm.Alltoallv([answers, 2 * recv_counts], [replies, 2 * send_counts])
        their_distance, their_succ = replies[0::2], replies[1::2]
        distance[active] += their_distance
        reached_tail = their_succ == targets         # the successor was the tail: done
        succ[active] = their_succ
        active = active[~reached_tail]
    elapsed = coc.Wtime() - start

    wrong = comm.allreduce(int((distance != expected).sum()))
    verified = bool(wrong == 0)
    elapsed = comm.allreduce(elapsed, op=coc.MAX)
    comm_time = comm.allreduce(clock.seconds) / size
    if rank == 0:
        print(f"list ranking: {n * size} elements on {size} ranks, {rounds} rounds of pointer "
              f"jumping: {wrong} wrong ranks: {'verified' if verified else 'FAILED'}")
        print(f"list ranking: time {elapsed:.3f} s, communication {comm_time:.3f} s "
              f"({100 * comm_time / elapsed:.1f} %)", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"time": elapsed, "comm_time": comm_time, "verified": verified,
                           "params": {**vars(args), "ranks": size}}, out)
    comm.barrier()        # rank 0's report is out before a failed check ends the job
    if not verified:
        sys.exit(1)


if __name__ == "__main__":
    main()
