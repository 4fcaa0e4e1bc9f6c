"""Time an application's communication calls and report its run as examples/ programs do.

The application programs in ``examples/`` (docs/examples.md) check their own answer and end
with the same report, which ``benchmarks/applications.py`` and ``coc bench reproduce`` read:
two lines at rank 0, ``NAME: <what was computed>: verified`` (or ``FAILED``) and ``NAME: time
T s, communication C s (P %)``, an optional JSON file ``{time, comm_time, verified, params}``,
and a non-zero exit on every rank when the check failed. This module is that report, so a
new program reports the same way with two names::

    clock = Stopwatch()
    with clock:                     # around each communication call
        comm.Allreduce(local, total, op=coc.SUM)
    ...
    report(comm, "heat", f"residual {r:.3e}", verified=ok, elapsed=elapsed, stopwatch=clock,
           json_path=args.json, params=vars(args))
"""

import json
import sys

import coc

__all__ = ["Stopwatch", "report"]


class Stopwatch:
    """Add up the seconds spent inside ``with stopwatch:`` blocks (the communication calls).

    Examples
    --------
    >>> clock = Stopwatch()
    >>> with clock:
    ...     pass
    >>> clock.seconds >= 0.0
    True
    >>> clock.reset(); clock.seconds
    0.0
    """

    def __init__(self):
        self.seconds = 0.0
        self._started = None

    def __enter__(self):
        self._started = coc.Wtime()
        return self

    def __exit__(self, *exc):
        self.seconds += coc.Wtime() - self._started

    def reset(self):
        """Forget the time counted so far (a program's set-up is not part of its measurement)."""
        self.seconds = 0.0


def report(comm, name, summary, *, verified, elapsed, stopwatch, json_path=None, params=None):
    """Report an application's run at rank 0 and end a run whose check failed.

    Collective: every rank of ``comm`` calls it. Rank 0 prints ``NAME: SUMMARY: verified``
    (or ``FAILED``), then ``NAME: time T s, communication C s (P %)``, where T is the slowest
    rank's ``elapsed`` and C the mean over ranks of ``stopwatch.seconds``, and writes the JSON
    report when ``json_path`` is given. The ranks then meet at a barrier, so rank 0's lines
    are out before a failed check ends the job, and every rank exits with 1 if ``verified``
    is false.

    Parameters
    ----------
    comm : coc.Communicator
        The ranks that ran the program.
    name : str
        The program's name, the first word of both lines.
    summary : str or callable
        What was computed and how it was checked. A callable is called at rank 0 only and
        returns the text, for a summary made of values only rank 0 holds.
    verified : bool
        Whether the program's check passed (the same on every rank).
    elapsed : float
        This rank's seconds for the measured part.
    stopwatch : Stopwatch
        The time this rank spent in communication calls.
    json_path : str, optional
        Where to write ``{"time", "comm_time", "verified", "params"}``.
    params : dict, optional
        The run's parameters for the JSON report; the number of ranks is added as ``ranks``.
    """
    elapsed = comm.allreduce(elapsed, op=coc.MAX)
    comm_time = comm.allreduce(stopwatch.seconds) / comm.size
    if comm.rank == 0:
        text = summary() if callable(summary) else summary
        share = 100 * comm_time / elapsed if elapsed > 0 else 0.0
        print(f"{name}: {text}: {'verified' if verified else 'FAILED'}")
        print(f"{name}: time {elapsed:.3f} s, communication {comm_time:.3f} s "
              f"({share:.1f} %)", flush=True)
        if json_path:
            with open(json_path, "w") as out:
                json.dump({"time": elapsed, "comm_time": comm_time, "verified": bool(verified),
                           "params": {**(params or {}), "ranks": comm.size}}, out)
    comm.barrier()        # rank 0's report is out before a failed check ends the job
    if not verified:
        sys.exit(1)
