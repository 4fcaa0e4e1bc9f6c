"""Record what a testbed made, so ``down`` can remove it from another process or after a crash.

The state of testbed ``NAME`` is ``/run/coc-testbed/NAME.json``: the plan (namespaces,
bridges, veths, addresses, routes), the qdisc kinds the kernel offered, the phase
(``building`` while ``up`` runs, ``up`` once done) and how long building took. It is written
*before* anything is created, so a crash mid-way still leaves a record. ``/run`` is a tmpfs:
state vanishes at reboot, exactly like the namespaces it describes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coc.errors import TestbedError
from coc.testbed.names import check_name

__all__ = ["STATE_DIR", "path", "save", "load", "remove", "recorded", "lock"]

STATE_DIR = Path("/run/coc-testbed")

#: A recorded state: the plan (:class:`coc.testbed.plan.Plan`) with ``phase``, ``created``,
#: ``offered``, ``scale``, ``stale_removed`` and ``up_seconds``, as JSON reads it back.
Record = dict[str, Any]


def path(name: str) -> Path:
    """Return the state file of testbed ``name``."""
    return STATE_DIR / f"{check_name(name)}.json"


def save(state: Record) -> None:
    """Write ``state`` (a dict with a ``name``) atomically."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    target = path(state["name"])
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, target)


def load(name: str) -> Record | None:
    """Return the recorded state of testbed ``name``, or None if there is none."""
    try:
        record: Record = json.loads(path(name).read_text())
        return record
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TestbedError(f"cannot read the state of testbed {name!r} ({path(name)}): {exc}; "
                           f"`coc testbed down --name {name}` still removes its namespaces") \
            from exc


def remove(name: str) -> None:
    """Forget the state of testbed ``name`` (no error if there is none)."""
    with contextlib.suppress(FileNotFoundError):
        path(name).unlink()


def recorded() -> list[str]:
    """Return the names of all recorded testbeds, sorted."""
    if not STATE_DIR.is_dir():
        return []
    return sorted(p.stem for p in STATE_DIR.glob("*.json"))


@contextlib.contextmanager
def lock(name: str, *, drop: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on testbed ``name`` so two ``up``/``down`` never interleave.

    ``drop`` removes the lock file on the way out (``down`` leaves nothing behind); a waiter
    that then gets the lock of the removed file notices and locks the new one instead.
    """
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    target = STATE_DIR / f"{check_name(name)}.lock"
    while True:
        f = open(target, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            same = os.stat(target).st_ino == os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    try:
        yield
        if drop:
            target.unlink()
    finally:
        f.close()
