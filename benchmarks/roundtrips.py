"""The round trips the two-rank benchmarks time, written once for all of them.

``comm_vs_mpi4py.py``, ``small_messages.py`` and ``mpi4py_mode.py`` import it; they run as
scripts (``python benchmarks/NAME.py``, and as ranks ``python benchmarks/NAME.py --rank``),
so this directory is first on ``sys.path`` for the driver and the ranks alike. ``rank`` is
passed in, not asked of ``comm`` inside the timed loop.
"""

__all__ = ["buffer_round_trip", "object_round_trip"]


def buffer_round_trip(comm, buf, rank, peer, tag=1):
    """Rank 0 sends ``buf`` to ``peer`` and receives it back; the peer echoes it."""
    if rank == 0:
        comm.Send(buf, peer, tag)
        comm.Recv(buf, peer, tag)
    else:
        comm.Recv(buf, peer, tag)
        comm.Send(buf, peer, tag)


def object_round_trip(comm, obj, rank, peer, tag=2):
    """Rank 0 sends the object ``obj`` to ``peer`` and receives it back; the peer echoes it."""
    if rank == 0:
        comm.send(obj, peer, tag)
        comm.recv(source=peer, tag=tag)
    else:
        comm.send(comm.recv(source=peer, tag=tag), peer, tag)
