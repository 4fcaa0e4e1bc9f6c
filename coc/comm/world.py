"""This process's place in the job: the engine, the rendezvous, where every rank runs.

:func:`init` opens the engine (through the engine port, :mod:`coc.comm.port`) with the
credentials ``coc-run`` hands the rank, exchanges
addresses for peers and routes (``coc.rendezvous``), learns the site and host of every
rank and returns the world communicator. Without ``coc-run`` it returns a world of one rank
(messages to self work). :func:`finalize`, also run at exit, waits for every rank (so late
messages still find their receiver) and closes the engine.
"""

from __future__ import annotations

import atexit
import os
import socket
import time
import warnings
from typing import Any, Optional, TypedDict

from coc.comm import port as engine_port
from coc.comm import transport
from coc.comm.communicator import Communicator
from coc.comm.request import Request, run
from coc.errors import CocError
from coc.routes import Routes, next_hops

__all__ = ["World", "init", "finalize", "initialized", "Wtime", "Wtick", "counters",
           "reset_counters"]

#: This process's message counters: messages and bytes sent, those that crossed a site
#: boundary (``inter_site_*``) and those sent through the site's MPI (``site_mpi_messages``).
#: A mapping of those names to ints (C integers in the binding, which the fast path counts
#: in); ``comm.stats()`` returns a copy as a dict.
counters = engine_port.Counters()

#: Seconds :func:`finalize` waits for the other ranks before closing anyway.
FINALIZE_TIMEOUT = float(os.environ.get("COC_FINALIZE_TIMEOUT", "60"))

class _State(TypedDict):
    comm: Optional[Communicator]     # the world communicator between init and finalize
    finalized: bool


_state: _State = {"comm": None, "finalized": False}


def reset_counters() -> None:
    """Set every counter of :data:`counters` back to zero."""
    for key in counters:
        counters[key] = 0


class World:
    """The engine port of this process and what it knows of every rank of the job."""

    def __init__(self, port: engine_port.Port, rank: int, size: int, site: str,
                 host: str) -> None:
        self.port, self.rank, self.size = port, rank, size
        self.site, self.host = site, host
        # per world rank: 1 when it runs on another site. One object for the world's life,
        # updated in place whenever ``sites`` is set: the binding's counting holds it and
        # reads it per message (coc._engine.Direct), no attribute looked up.
        self.foreign = bytearray(size)
        self.sites, self.hosts = [site] * size, [host] * size
        self.counters = counters
        self.next_block = 1
        self._levels: list[dict[str, int]] | None = None
        self.routes: Routes = {}         # {world rank: {size class: [(next hop, weight), ...]}}
        self.comm_names: dict[int, str] = {}   # {context block: communicator name}

    @property
    def sites(self) -> list[str]:
        """Return the site of every world rank (``init`` sets them once it knows them)."""
        return self._sites

    @sites.setter
    def sites(self, sites: list[str]) -> None:
        self._sites = sites
        self.foreign[:] = bytes(s != self.site for s in sites)

    @property
    def gateways(self) -> list[int]:
        """Return the endpoint ids of the gateway daemons this rank sends through."""
        return [hop for hop in next_hops(self.routes) if hop >= self.size]

    def count(self, dest: int, nbytes: int, site_mpi: bool = False) -> None:
        """Count one message of ``nbytes`` to world rank ``dest``."""
        c = self.counters
        c["messages"] += 1
        c["site_mpi_messages"] += site_mpi
        c["bytes"] += nbytes
        if self.sites[dest] != self.site:
            c["inter_site_messages"] += 1
            c["inter_site_bytes"] += nbytes

    def describe_pending(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add ``comm`` (name and traffic kind) to ``Engine.pending()`` entries.

        Peers stay endpoint ids, which are world ranks for ranks.
        """
        for op in ops:
            block, slot = divmod(op.pop("context"), transport.CONTEXTS)
            kind = transport.SLOT_NAMES.get(slot, f"context {slot}")
            op["comm"] = f"{self.comm_names.get(block, f'block {block}')} ({kind})"
        return ops

    def color(self, level: str, rank: int) -> int:
        """Return world rank ``rank``'s color at ``level`` (from the job's topology file)."""
        if self._levels is None:
            self._levels = _rank_levels(self)
        try:
            return self._levels[rank][level]
        except KeyError:
            raise ValueError(f"unknown level {level!r}: expected wan, site, network or host "
                             f"(host {self.hosts[rank]!r})") from None


def _rank_levels(world: World) -> list[dict[str, int]]:
    """Return ``[{level: color}]`` per rank from ``COC_TOPOLOGY``, or from site and host names."""
    path = os.environ.get("COC_TOPOLOGY")
    if path:
        from coc import topology
        from coc.errors import TopologyWarning
        with warnings.catch_warnings():   # coc-run has shown the topology's warnings once
            warnings.simplefilter("ignore", TopologyWarning)
            levels = topology.levels(topology.load(path))
        return [levels[h] for h in world.hosts]
    sites = sorted(set(world.sites))
    places = sorted(set(zip(world.sites, world.hosts)))
    return [{"wan": 0, "site": sites.index(s), "network": sites.index(s),
             "host": places.index((s, h))} for s, h in zip(world.sites, world.hosts)]


def init() -> Communicator:
    """Join the job and return the world communicator (``coc.COMM_WORLD``).

    Under ``coc-run`` this opens the engine, meets every other rank and learns where each
    runs; started directly it returns a world of one rank. Calling it again returns the
    same communicator.

    Examples
    --------
    >>> import coc
    >>> comm = coc.init()
    >>> comm.size, comm.rank, comm.sendrecv("hi", 0)
    (1, 0, 'hi')
    """
    if _state["comm"] is not None:
        return _state["comm"]
    if _state["finalized"]:
        raise CocError("coc.init() after coc.finalize(): a process joins a job once")
    site = os.environ.get("COC_SITE", "local")
    host = os.environ.get("COC_HOST", socket.gethostname())
    site_mpi = engine_port.site_mpi_enabled()
    if "COC_CONTROL_FD" in os.environ:
        port, me = engine_port.open_under_coc_run()
    elif site_mpi and engine_port.site_mpi_size() > 1:
        port, me = engine_port.open_from_site_mpi()
        site, host = me["placement"][me["rank"]]  # type: ignore[index]  # MPI's: never None
    else:
        port, me = engine_port.open_alone(site, host)
    rank, size = me["rank"], me["size"]
    world = World(port, rank, size, site, host)
    world.routes = me["routes"] if size > 1 else {}
    comm = Communicator(world, range(size), 0, "COMM_WORLD")
    placement = me["placement"]
    if placement is None:             # a coc-run whose rendezvous does not say: ask the ranks
        from coc.comm.collectives import flat
        placement = run(flat.allgather(comm, (site, host)), comm)
    world.sites = [s for s, _ in placement]
    world.hosts = [h for _, h in placement]
    if site_mpi:                      # rebuilt: the world communicator gets its MPI ones
        port.use_site_mpi(rank, site)
        comm = Communicator(world, range(size), 0, "COMM_WORLD")
    _state["comm"] = comm
    if "COC_CONTROL_FD" in os.environ:
        port.serve_control(world.describe_pending)
    atexit.register(finalize)
    return comm


def initialized() -> bool:
    """Return True between :func:`init` and :func:`finalize`."""
    return _state["comm"] is not None


def finalize() -> None:
    """Wait (bounded) for every rank to get here, then close the engine. Idempotent."""
    comm = _state["comm"]
    if comm is None:
        return
    _state["comm"], _state["finalized"] = None, True
    atexit.unregister(finalize)
    try:
        if comm.size > 1:
            from coc.comm.collectives import flat
            Request(flat.barrier(comm), comm).wait(timeout=FINALIZE_TIMEOUT)
    except CocError:
        pass                     # a rank that is gone cannot be waited for
    finally:
        comm._world.port.close()


def Wtime() -> float:
    """Return elapsed wall-clock seconds (high resolution) since an arbitrary point."""
    return time.perf_counter()


def Wtick() -> float:
    """Return the resolution of :func:`Wtime` in seconds."""
    return time.get_clock_info("perf_counter").resolution
