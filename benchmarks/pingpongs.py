"""The timed ping-pong loop and the Python objects of the two-rank benchmarks.

``small_messages.py`` and ``object_path.py`` import it (they run as scripts, and as ranks,
so this directory is first on ``sys.path``); the round trips themselves are
``roundtrips.py``'s.
"""

import statistics

__all__ = ["median_half_round_trip", "message_object"]


def message_object(kind):
    """The object a benchmark sends: ``"small"``, a dict of about 100 bytes pickled, or
    ``"large"``, a dict holding a 1 MiB array."""
    import numpy as np
    if kind == "small":
        return {"step": 7, "name": "halo", "value": 3.25, "ids": [1, 2, 3, 4, 5, 6, 7, 8]}
    return {"step": 7, "data": np.zeros((1 << 20) // 8)}


def median_half_round_trip(comm, wtime, rank, peer, body, iterations):
    """Return the median half round trip of ``body`` (one round trip on rank 0), timed with
    ``wtime`` over ``iterations`` after ``iterations // 10 + 2`` warm-up ones and a barrier."""
    for _ in range(iterations // 10 + 2):
        body()
    comm.Barrier()
    times = []
    for _ in range(iterations):
        t0 = wtime()
        body()
        times.append(wtime() - t0)
    return statistics.median(times) / 2
