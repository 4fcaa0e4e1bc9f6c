"""A global clock for the job: every rank's local clock mapped onto rank 0's, as MPIBench does.

Rank 0 and each other rank in turn exchange small messages: the rank reads its clock
(``t0``), rank 0 answers with its own reading ``T``, the rank reads again (``t1``). Rank 0
read ``T`` somewhere inside ``[t0, t1]``, so ``offset = T - (t0 + t1) / 2`` is wrong by at most
half the round trip; the exchange with the smallest round trip gives the offset and its
bound. A second pass some time later gives the drift (rate difference); it is applied only
when it is larger than what the two bounds allow, so a noisy estimate never makes a good
clock worse. A last pass at the end of a run measures what is left (the residual). Clocks
drift linearly over minutes, so the error during the run is at most the larger of the two
ends: :func:`accuracy`.

Test hook: ``COC_BENCH_TEST_SKEW="RANK:OFFSET_NS:PPM,..."`` distorts those ranks' local clocks
(:func:`coc._timing.set_skew`) so tests can check that calibration removes a known error.
"""

import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from coc.errors import CocError

try:
    from coc import _timing
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError("coc bench needs the compiled timing kernel coc._timing; build it with "
                      "`python setup.py build_ext --inplace` or reinstall coc") from exc

__all__ = ["Estimate", "Calibration", "apply_test_skew", "exchange_pass", "calibrate",
           "residual", "accuracy", "truth_offset_ns"]

TAG = 31_999          # tag of calibration messages (distinct from the patterns' tags)
EXCHANGES = 200       # exchanges per rank per pass
QUICK_EXCHANGES = 100
WARMUP_EXCHANGES = 20  # first exchanges of a pass, not used (connections, caches, wake-ups)


@dataclass
class Estimate:
    """One pass's result for one rank: offset to rank 0, its error bound, when it was taken."""

    offset_ns: float
    bound_ns: float       # half the smallest round trip: |true - estimate| <= bound
    at_ns: float          # local time of the best exchange's midpoint


@dataclass
class Calibration:
    """How one rank's local clock maps to global time, and how well that is known."""

    offset_ns: float
    drift: float          # rate difference (dimensionless; 1e-6 = 1 ppm)
    ref_ns: float         # local time the offset refers to
    bound_ns: float       # error bound of the offset at ref_ns
    drift_bound: float    # how well the drift is known (what the two bounds allow)
    drift_applied: bool

    def clock(self):
        """Return the :class:`coc._timing.Clock` that reads global time."""
        return _timing.Clock(int(round(self.offset_ns)),
                             self.drift if self.drift_applied else 0.0, int(self.ref_ns))

    def as_dict(self):
        """Return the calibration as plain data for the JSON output."""
        return asdict(self)


def apply_test_skew(rank, text=None):
    """Distort this rank's local clock as ``COC_BENCH_TEST_SKEW`` asks (a test hook).

    Examples
    --------
    >>> apply_test_skew(1, "1:5000:0,2:-7:1.5")
    (5000, 0.0)
    >>> apply_test_skew(1, "")
    (0, 0.0)
    """
    text = os.environ.get("COC_BENCH_TEST_SKEW", "") if text is None else text
    offset, ppm = 0, 0.0
    for item in filter(None, text.split(",")):
        try:
            r, off, rate = item.split(":")
            if int(r) == rank:
                offset, ppm = int(off), float(rate)
        except ValueError:
            raise CocError(f"COC_BENCH_TEST_SKEW: bad item {item!r} "
                           "(expected RANK:OFFSET_NS:PPM)") from None
    _timing.set_skew(offset, ppm)
    return offset, ppm


def _serve(comm, peer, exchanges, read):
    """Rank 0's side of one pass with ``peer``: answer every probe with a clock reading."""
    buf = np.zeros(1, dtype=np.int64)
    for _ in range(WARMUP_EXCHANGES + exchanges):
        comm.Recv(buf, source=peer, tag=TAG)
        buf[0] = read()
        comm.Send(buf, dest=peer, tag=TAG)


def _probe(comm, exchanges, read):
    """A rank's side of one pass: return the :class:`Estimate` of its smallest round trip."""
    out, buf = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    best = None
    for i in range(WARMUP_EXCHANGES + exchanges):
        t0 = read()
        out[0] = t0
        comm.Send(out, dest=0, tag=TAG)
        comm.Recv(buf, source=0, tag=TAG)
        t1 = read()
        if i >= WARMUP_EXCHANGES and (best is None or t1 - t0 < best[1] - best[0]):
            best = (t0, t1, int(buf[0]))
    t0, t1, remote = best
    mid = (t0 + t1) / 2
    return Estimate(offset_ns=remote - mid, bound_ns=(t1 - t0) / 2, at_ns=mid)


def exchange_pass(backend, exchanges=EXCHANGES, read=None):
    """Run one pass, rank 0 serving every other rank in turn; return this rank's :class:`Estimate`.

    Every rank reads ``read`` (its local clock by default; its calibrated clock when
    measuring a residual). Rank 0's estimate is exact: zero.
    """
    read = read or _timing.local_ns
    if backend.rank == 0:
        for peer in range(1, backend.size):
            _serve(backend.comm, peer, exchanges, read)
        return Estimate(0.0, 0.0, float(read()))
    return _probe(backend.comm, exchanges, read)


def calibrate(backend, exchanges=EXCHANGES, interval=1.0):
    """Calibrate this rank's clock with two passes ``interval`` seconds apart.

    The offset comes from the pass with the smaller bound, the drift from both. Returns the
    :class:`Calibration`; every rank returns its own.
    """
    first = exchange_pass(backend, exchanges)
    backend.comm.Barrier()
    time.sleep(interval)
    backend.comm.Barrier()
    second = exchange_pass(backend, exchanges)
    span = second.at_ns - first.at_ns
    if backend.rank == 0 or span <= 0:
        return Calibration(0.0, 0.0, second.at_ns, 0.0, 0.0, False)
    drift = (second.offset_ns - first.offset_ns) / span
    drift_bound = (first.bound_ns + second.bound_ns) / span
    best = min(first, second, key=lambda e: e.bound_ns)
    return Calibration(offset_ns=best.offset_ns, drift=drift, ref_ns=best.at_ns,
                       bound_ns=best.bound_ns, drift_bound=drift_bound,
                       drift_applied=abs(drift) > drift_bound)


def residual(backend, clock, exchanges=EXCHANGES):
    """Measure what the calibrated clocks still disagree by: ``(offset_ns, bound_ns)``.

    Both sides read the *global* clock, so a perfect calibration gives an offset of zero
    (within the bound).
    """
    est = exchange_pass(backend, exchanges, read=clock.now)
    return est.offset_ns, est.bound_ns


def accuracy(calibration, residual_ns, residual_bound_ns):
    """Return the error bound of a rank's global clock over the run, in ns.

    At the start it is the calibration bound; at the end, the measured residual plus its
    bound; in between (linear drift) at most the larger of the two.

    Examples
    --------
    >>> cal = Calibration(0.0, 0.0, 0.0, bound_ns=4000.0, drift_bound=0.0, drift_applied=False)
    >>> accuracy(cal, -1500.0, 4200.0)
    5700.0
    """
    return max(calibration.bound_ns, abs(residual_ns) + residual_bound_ns)


def truth_offset_ns(clock):
    """Return global time minus the undistorted OS clock (for tests on one host).

    On one host every process shares CLOCK_MONOTONIC_RAW, so after a good calibration this
    difference is the same on every rank, whatever skew was injected.

    The global reading is bracketed by two OS readings, and of several tries the one with
    the narrowest bracket is kept: a process preempted between the readings (a busy
    machine) would otherwise add the time it lost to the difference.
    """
    os_clock = getattr(time, "CLOCK_MONOTONIC_RAW", time.CLOCK_MONOTONIC)
    best = None
    for _ in range(_TRUTH_TRIES):
        a = time.clock_gettime_ns(os_clock)
        g = clock.now()
        b = time.clock_gettime_ns(os_clock)
        if best is None or b - a < best[0]:
            best = (b - a, g - (a + b) / 2)
    return best[1]


#: Readings :func:`truth_offset_ns` tries, keeping the one least disturbed.
_TRUTH_TRIES = 32
