"""Gateway failover: many kill points, with the time to detect the loss and to recover.

Endpoint 1 streams messages (8 B to 2 MB, eager and rendezvous, each stamped with its
index) to endpoint 2, both in this process, through two gateway daemons (real processes,
``python -m coc.gateway``) that both endpoints reach: 1 -> {10, 11} -> 2. In every run one
gateway (chosen at random) is killed with SIGKILL — or stopped with SIGSTOP (``--stop``) —
after a random number of messages, and the stream goes on through the other. Per run it
records:

- **detect**: from the signal to the sender's engine counting the failover (its
  ``failovers`` counter; a kill is seen when the socket closes, a stop only after the
  liveness timeout);
- **recover**: from the signal to the first message sent after it that the receiver has;
- the frames sent again, the repeats the receiver dropped, and any message lost, repeated,
  reordered or corrupted (must be 0).

Prints the medians and spreads (min..max) over the runs and the totals; the same stream
without a kill, run first, is the reference (its time per message). Run:
``python benchmarks/failover.py [--runs N] [--messages M] [--seed S] [--stop]
[--liveness-ms MS] [--json FILE]``.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

SIZES = (8, 1000, 65536, 300_000, 2_000_000)
SECRET = b"failover-benchmark-secret-32byte"
TIMEOUT = 60


def message(i):
    """Message i: its index in the first 8 bytes, then i % 251."""
    buf = np.full(SIZES[i % len(SIZES)], i % 251, dtype=np.uint8)
    buf[: min(8, buf.size)] = np.frombuffer(np.uint64(i).tobytes(), np.uint8)[: min(8, buf.size)]
    return buf


def setup():
    """Open endpoints 1 and 2 and start gateways 10 and 11; return (a, b, gateways)."""
    from coc._native import engine
    from coc.gateway import GatewayProcess
    a = engine.Engine(1, SECRET, listen_host="127.0.0.1")
    b = engine.Engine(2, SECRET, listen_host="127.0.0.1")
    gws = [GatewayProcess({"self_id": gid, "secret": SECRET,
                           "peers": {1: a.address, 2: b.address},
                           "routes": {1: [[1, 1]], 2: [[2, 1]]}}, timeout=TIMEOUT,
                          stderr=subprocess.DEVNULL)
           for gid in (10, 11)]
    for eng, other in ((a, 2), (b, 1)):
        for gid, gw in zip((10, 11), gws):
            eng.add_peer(gid, gw.address)
        eng.set_route(other, [10, 11])
    return a, b, gws


def watch(eng, recv, since, seen, poll=0.0005):
    """Record in ``seen`` the seconds from ``since`` until ``eng`` counts a failover
    ("detect") and until ``recv`` (the first message sent after the signal) is complete
    ("recover")."""
    while time.monotonic() - since < TIMEOUT and len(seen) < 2:
        now = time.monotonic() - since
        if "detect" not in seen and eng.stats()["failovers"]:
            seen["detect"] = now
        if "recover" not in seen and recv.done:
            seen["recover"] = now
        time.sleep(poll)


def run(count, at, victim, sig, window=12):
    """One stream of ``count`` messages; signal ``victim`` (0/1, or None) after message
    ``at``. Return a dict of the run's figures."""
    a, b, gws = setup()
    try:
        bufs = [np.empty(SIZES[i % len(SIZES)], np.uint8) for i in range(count)]
        recvs = [b.irecv(buf, 1) for buf in bufs]
        sends, kept, hit, seen = [], [], None, {}
        start = time.monotonic()
        for i in range(count):
            kept.append(message(i))
            sends.append(a.isend(kept[-1], 2, tag=i))
            if i == at and victim is not None:
                hit = time.monotonic()
                os.kill(gws[victim].pid, sig)
                watcher = threading.Thread(target=watch, args=(a, recvs[at + 1], hit, seen),
                                           daemon=True)
                watcher.start()
            if len(sends) >= window:
                sends[-window].wait(TIMEOUT)
        for r in recvs:
            r.wait(TIMEOUT)
        if hit is not None:
            watcher.join(TIMEOUT)
        detect, recover = seen.get("detect"), seen.get("recover")
        for s in sends:
            s.wait(TIMEOUT)
        elapsed = time.monotonic() - start
        tags = [r.wait(0).tag for r in recvs]
        bad = sum(not (buf.size == message(i).size and (buf == message(i)).all())
                  for i, buf in enumerate(bufs))
        errors = bad + sum(t != i for i, t in enumerate(tags))
        sa, sb = a.stats(), b.stats()
        return {"elapsed": elapsed, "detect": detect, "recover": recover, "errors": errors,
                "resent": sa["frames_resent"] + sb["frames_resent"],
                "dropped": sa["duplicates_dropped"] + sb["duplicates_dropped"]}
    finally:
        if victim is not None and sig == signal.SIGSTOP:
            os.kill(gws[victim].pid, signal.SIGCONT)
        for gw in gws:
            gw.kill()
        a.close()
        b.close()


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return (f"{statistics.median(values) * 1e3:.1f} ms "
            f"({min(values) * 1e3:.1f}..{max(values) * 1e3:.1f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="kill points (default 30)")
    parser.add_argument("--messages", type=int, default=40, help="messages per run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stop", action="store_true", help="SIGSTOP instead of SIGKILL")
    parser.add_argument("--liveness-ms", type=int, default=1500)
    parser.add_argument("--json", help="write the runs here")
    args = parser.parse_args(argv)
    os.environ["COC_LIVENESS_MS"] = str(args.liveness_ms)
    sig = signal.SIGSTOP if args.stop else signal.SIGKILL
    rng = random.Random(args.seed)
    runs, references = [], []
    for k in range(args.runs):
        if k % 3 == 0:  # the reference, interleaved so drifting load hits both alike
            references.append(run(args.messages, -1, None, sig))
        at, victim = rng.randrange(args.messages - 5), rng.randrange(2)
        runs.append({"at": at, "victim": victim, **run(args.messages, at, victim, sig)})
        print(f"run {k + 1}/{args.runs}: kill after message {at} of gateway {10 + victim}: "
              f"detect {spread([runs[-1]['detect']])}, recover {spread([runs[-1]['recover']])}, "
              f"resent {runs[-1]['resent']}, errors {runs[-1]['errors']}", flush=True)
    reference = {"elapsed": statistics.median(r["elapsed"] for r in references)}
    per_msg = reference["elapsed"] / args.messages
    # the summary (printed, then --json) has the shape of every benchmark's: each stands alone
    print(f"\n{len(runs)} kill points ({signal.Signals(sig).name}, liveness "
          f"{args.liveness_ms} ms), {args.messages} messages each; load {os.getloadavg()[0]:.1f}")
    print(f"reference stream without a kill (median of {len(references)}, interleaved): "
          f"{reference['elapsed'] * 1e3:.0f} ms "
          f"({per_msg * 1e3:.2f} ms per message)")
    print(f"detect:  {spread([r['detect'] for r in runs])}")
    print(f"recover: {spread([r['recover'] for r in runs])}")
    print(f"stream with a kill / without: "
          f"{statistics.median(r['elapsed'] for r in runs) / reference['elapsed']:.2f}x (median)")
    print(f"frames/streams sent again: {sum(r['resent'] for r in runs)}, repeats dropped: "
          f"{sum(r['dropped'] for r in runs)}, errors (lost, repeated, reordered, corrupted): "
          f"{sum(r['errors'] for r in runs)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"references": references, "runs": runs}, f, indent=1)
    return 1 if any(r["errors"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
