"""The ``pbs`` spawner (placeholder while it is written)."""

from coc.launcher.spawners.local import LocalSpawner

__all__ = ["PbsSpawner"]


class PbsSpawner(LocalSpawner):
    """Start a PBS site's agent on the job's first node."""

    kind = "pbs"
