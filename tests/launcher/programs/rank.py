"""A rank for launcher tests: records its pids, then misbehaves as told."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--pid-dir", help="write <rank>.json with this rank's pids here")
parser.add_argument("--grandchild", action="store_true", help="start a sleeping grandchild")
parser.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM")
parser.add_argument("--exit-rank", type=int, help="this rank exits with --code")
parser.add_argument("--code", type=int, default=3)
parser.add_argument("--kill-rank", type=int, help="this rank SIGKILLs itself")
parser.add_argument("--raise-rank", type=int, help="this rank raises an exception")
parser.add_argument("--after", type=float, default=0.3, help="seconds before misbehaving")
parser.add_argument("--stay", choices=["sleep", "stdin", "exit"], default="sleep",
                    help="what the other ranks do")
args = parser.parse_args()
rank = int(os.environ["COC_RANK"])
if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
record = {"rank": rank, "pid": os.getpid(), "agent": os.getppid()}
if args.grandchild:
    record["grandchild"] = subprocess.Popen(["sleep", "300"]).pid
if args.pid_dir:
    path = os.path.join(args.pid_dir, f"{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.rename(path + ".tmp", path)
print(f"rank {rank} ready", flush=True)
if rank in (args.exit_rank, args.kill_rank, args.raise_rank):
    time.sleep(args.after)
    if args.pid_dir:
        with open(os.path.join(args.pid_dir, "failed-at"), "w") as f:
            f.write(repr(time.time()))
    if rank == args.exit_rank:
        sys.exit(args.code)
    if rank == args.kill_rank:
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"rank {rank} gives up")
if args.stay == "stdin":
    sys.stdin.read()
elif args.stay == "sleep":
    time.sleep(300)
