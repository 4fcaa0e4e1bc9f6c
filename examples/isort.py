"""Sort integer keys by buckets and an all-to-all exchange, in the shape of NAS IS.

The application of the MPICH-GP paper (Park et al.), which ran the NAS Parallel Benchmarks'
integer sort (IS) across two private-IP clusters at classes S to B. As IS does, every rank
holds ``total / ranks`` keys drawn as the mean of four uniform numbers (a bell-shaped
distribution over ``0 .. max_key``) and each of ten iterations

- changes two keys (as IS does, so no iteration repeats the last one's work);
- counts its keys in 1024 buckets of equal key range, and an ``Allreduce`` adds the counts;
- gives each rank a run of whole buckets holding about ``total / ranks`` keys;
- sends every key to the rank owning its bucket: an ``Alltoall`` of the counts, then an
  ``Alltoallv`` of the keys (coc's multi-level form sends one message per pair of sites);
- ranks its keys by counting (a histogram over its key range and a prefix sum, offset by an
  ``Exscan`` of the ranks' key counts), which yields the keys in sorted order.

It checks itself after the last iteration: every received key lies in its rank's range, the
rank's smallest key is ranked after all keys of the ranks before it, the keys read off rank
after rank are in order, and their count and a checksum of their values are those of the
keys generated. Verified means all of these hold.

Run: ``coc-run -n 8 python examples/isort.py`` (class S: 2^16 keys up to 2^11; CI size).
Real size: ``coc-run -n 8 python examples/isort.py --class A`` (2^23 keys up to 2^19).
"""

import argparse

import numpy as np

import coc
from coc.bench.application import Stopwatch, report


#: NAS IS problem classes: (log2 of the number of keys, log2 of the largest key).
CLASSES = {"S": (16, 11), "W": (20, 16), "A": (23, 19), "B": (25, 21), "C": (27, 23)}
ITERATIONS, BUCKET_BITS = 10, 10


def checksum(keys):
    """Return a checksum of a multiset of keys (a sum that wraps at 2^64)."""
    values = keys.astype(np.uint64)
    return int((values * values + values * np.uint64(2654435761)).sum(dtype=np.uint64))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class", dest="cls", choices=CLASSES, default="S",
                        help="NAS IS problem class")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()

    comm = coc.init()
    rank, size = comm.rank, comm.size
    total_bits, key_bits = CLASSES[args.cls]
    total, max_key = 2 ** total_bits, 2 ** key_bits
    shift = key_bits - BUCKET_BITS
    count = (rank + 1) * total // size - rank * total // size
    uniform = np.random.default_rng([args.seed, rank]).random((count, 4))
    keys = (uniform.sum(axis=1) * (max_key / 4)).astype(np.int32)
    send_counts, recv_counts = np.empty(size, np.int64), np.empty(size, np.int64)
    bucket_sizes = np.empty(2 ** BUCKET_BITS, np.int64)
    clock = Stopwatch()

    comm.Barrier()
    start = coc.Wtime()
    for iteration in range(1, ITERATIONS + 1):
        if rank == 0:                             # IS's per-iteration change of two keys
            keys[iteration] = iteration
            keys[iteration + ITERATIONS] = max_key - iteration
        local_sizes = np.bincount(keys >> shift, minlength=2 ** BUCKET_BITS)
        with clock:
            comm.Allreduce(local_sizes, bucket_sizes, op=coc.SUM)
        before = np.cumsum(bucket_sizes) - bucket_sizes
        bucket_owner = np.minimum(before * size // total, size - 1)
        key_owner = bucket_owner[keys >> shift]
        outgoing = keys[np.argsort(key_owner, kind="stable")]
        send_counts[:] = np.bincount(key_owner, minlength=size)
        with clock:
            comm.Alltoall(send_counts, recv_counts)
            received = np.empty(recv_counts.sum(), np.int32)
            comm.Alltoallv([outgoing, send_counts], [received, recv_counts])
        owned = np.flatnonzero(bucket_owner == rank)
        low = int(owned[0]) << shift if len(owned) else 0
        high = int(owned[-1] + 1) << shift if len(owned) else 0
        in_range = received.size == 0 or (received.min() >= low and received.max() < high)
        histogram = np.bincount(received - low, minlength=high - low) if in_range else None
        offset = np.zeros(1, np.int64)
        with clock:                               # (Exscan leaves rank 0's offset at 0)
            comm.Exscan(np.array([received.size], np.int64), offset, op=coc.SUM)
        if in_range:                              # the global rank of each key value
            key_rank = offset[0] + np.cumsum(histogram) - histogram
    elapsed = coc.Wtime() - start

    # Check the last iteration: the keys, read off rank by rank, are sorted and are the keys
    # that were generated (same count, same checksum), and the ranks count them right.
    sorted_keys = np.repeat(np.arange(low, high, dtype=np.int32), histogram) if in_range \
        else np.sort(received)
    ends = [e for e in comm.allgather((sorted_keys[0], sorted_keys[-1]) if received.size
                                      else None) if e is not None]
    ordered = all(last <= first for (_, last), (first, _) in zip(ends, ends[1:]))
    sizes = comm.allgather(received.size)
    ranks_ok = offset[0] == sum(sizes[:rank]) and (
        received.size == 0 or key_rank[sorted_keys[0] - low] == offset[0])
    kept = sum(sizes) == total and \
        comm.allreduce(checksum(sorted_keys)) % 2 ** 64 == comm.allreduce(checksum(keys)) % 2 ** 64
    local_ok = comm.allreduce(bool(in_range and ranks_ok), op=coc.LAND)
    verified = bool(local_ok and ordered and kept)
    # every application ends alike, on purpose: one call of coc.bench's report()
    report(comm, "isort", f"class {args.cls}, {total} keys below {max_key} on {size} ranks, "
           f"{ITERATIONS} iterations: keys in their ranks' ranges and ranked {local_ok}, "
           f"sorted across ranks {ordered}, count and checksum kept {kept}",
           verified=verified, elapsed=elapsed, stopwatch=clock, json_path=args.json,
           params=vars(args))


if __name__ == "__main__":
    main()
