"""The engine port: coc.comm's one door to the native engine and to the site's MPI.

Every engine call of the communicator goes through this module, and so does the choice,
per communicator and per peer, between the site's own MPI (when the site's ``mpiexec``
started the ranks, :mod:`coc.comm.sitempi`) and the engine. It is the only module of
``coc.comm`` that imports the binding's adapter (:mod:`coc._native`) or the lookup of the
real mpi4py past coc's import hook (:mod:`coc.realmpi`), so a change to the engine's API touches this file, not the whole communicator
(tests/test_layers.py holds the rule).

- :func:`open_under_coc_run`, :func:`open_from_site_mpi` and :func:`open_alone` open the
  engine the three ways a rank starts and return a :class:`Port` and what the rank learnt;
- :meth:`Port.lanes` gives each communicator its :class:`EngineLanes` (every peer through
  the engine) or :class:`MixedLanes` (peers of this MPI job through MPI, others through
  the engine): the communicator, its requests and its collectives post and probe there.

Hot path: :meth:`EngineLanes.direct_path` gives a communicator the binding's
point-to-point (``Send``, ``Recv``, ``send``, ``recv``, ``Sendrecv``, ``sendrecv``,
``Isend``, ``Irecv``, ``isend``, ``irecv``: one C call each, no Python frame;
docs/performance.md, "Small messages from Python"); the requests of the non-blocking ones
are the binding's ``BufferRequest``, and :func:`coc.comm.request.waitall`/``testall`` the
binding's.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from coc import realmpi
from coc._native import engine as native
from coc.comm import pickling, sitempi, transport
from coc.errors import LaunchError
from coc.comm import request
from coc.comm.request import Envelope, Part, Status, awaiting, translate
from coc.routes import Routes, apply_delays, apply_routes, apply_wire, next_hops, parse_routes

if TYPE_CHECKING:
    from coc import rendezvous
    from coc.comm.communicator import Communicator

__all__ = ["Port", "EngineLanes", "MixedLanes", "site_mpi_enabled", "open_under_coc_run",
           "open_from_site_mpi", "open_alone", "Joined"]


class Joined(TypedDict):
    """What a rank learns when it opens the engine: its rank, the job's size, its routes
    and the ``(site, host)`` of every rank (None: the ranks must tell each other)."""

    rank: int
    size: int
    routes: Routes
    placement: list[tuple[str, ...]] | None


def site_mpi_enabled() -> bool:
    """Return True when ``COC_SITE_MPI=1`` and the site's mpi4py is importable."""
    return os.environ.get("COC_SITE_MPI") == "1" and realmpi.available()


def site_mpi_size() -> int:
    """Return the number of processes in the site's MPI job (its ``COMM_WORLD``)."""
    return realmpi.mpi().COMM_WORLD.Get_size()


class Port:
    """This process's engine and, once :meth:`use_site_mpi` ran, the site's MPI job."""

    def __init__(self, engine: native.Engine) -> None:
        self.engine = engine
        self.site_mpi: sitempi.SiteMPI | None = None   # when the site's MPI carries messages
        self.fileno, self.drain = engine.fileno, engine.drain

    def use_site_mpi(self, rank: int, site: str) -> None:
        """Let the site's MPI carry messages between ranks of its job and of ``site``.

        Collective over the MPI job (every process tells its world rank and site).
        """
        self.site_mpi = sitempi.SiteMPI(realmpi.mpi(), rank, site)

    @property
    def polls(self) -> bool:
        """True when requests may complete through the site's MPI, which has no fd to wait on."""
        return self.site_mpi is not None

    def lanes(self, ranks: Iterable[int], block: int, context: int,
              slots: int) -> EngineLanes:
        """Return how a communicator of world ranks ``ranks`` reaches its peers.

        ``block`` is its context block, ``context`` its first engine context, ``slots``
        the number of its contexts in use. With the site's MPI in use this is collective
        over the communicator's members in the MPI job.
        """
        if self.site_mpi is not None:
            mpi = self.site_mpi.communicator(ranks, block, self.engine, context, slots)
            if mpi is not None:
                return MixedLanes(self.engine, context, mpi)
        return EngineLanes(self.engine, context)

    def tag_ub(self) -> int | None:
        """Return the site's MPI's largest tag, or None when only the engine carries messages."""
        if self.site_mpi is None:
            return None
        MPI = self.site_mpi.MPI
        return MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)

    def set_peer_delay(self, peer: int, seconds: float) -> None:
        """Delay every frame to endpoint ``peer`` by ``seconds`` (emulated latency)."""
        self.engine.set_peer_delay(peer, seconds)

    def serve_control(self, describe: rendezvous.Describe) -> threading.Thread | None:
        """Answer coc-run's status questions about this engine (``coc.rendezvous``)."""
        from coc import rendezvous
        return rendezvous.serve_control(self.engine, describe)

    def close(self) -> None:
        """Close the engine (pending requests fail)."""
        self.engine.close()


#: A communicator's blocking point-to-point in the binding (:meth:`EngineLanes.direct_path`).
Direct = native.Direct
#: The message counters' type (``coc.comm.counters``): C integers the fast path counts in.
Counters = native.Counters
#: What the binding's fast path (``Direct``) needs of coc.comm, which it does not import.
_DIRECT_HOOKS = {"translate": translate, "Status": Status, "decode": transport.decode_obj,
                 "protocol": pickling.PROTOCOL, "inband": pickling.keep_inband,
                 "OutOfBand": pickling.OutOfBand,
                 "unpickler": pickling.unpickler_state(), "OBJ": transport.OBJ,
                 "BUF": transport.BUF, "await": awaiting, "ndarray": np.ndarray}
# The fast path's requests are coc.comm's requests (isinstance), and waiting for a list of
# requests is one call of the binding.
request.Request.register(native.BufferRequest)
request.use_batch(native.wait_all, native.test_all)


class EngineLanes:
    """A communicator's peers, every one reached through the engine.

    The methods take a context *slot* of the communicator.
    """

    direct = True               # point-to-point may use the binding's fast path

    def __init__(self, engine: native.Engine, context: int) -> None:
        self.context = context
        self._engine = engine

    def direct_path(self, comm: Communicator) -> Direct:
        """Return the binding's blocking point-to-point for ``comm`` (see ``Direct``)."""
        return Direct(self._engine, comm, _DIRECT_HOOKS)

    def via_mpi(self, target: int) -> bool:
        """Return True when messages to world rank ``target`` go through the site's MPI."""
        return False

    def isend(self, buf: Any, target: int, tag: int, slot: int) -> Part:
        """Start sending ``buf`` (or a list of buffers, as one message) to ``target``."""
        if type(buf) is list:
            return self._engine.isendv(buf, target, tag, self.context + slot)
        return self._engine.isend(buf, target, tag, self.context + slot)

    def irecv(self, buf: Any, source: int, tag: int, slot: int) -> Part:
        """Start receiving into ``buf`` from world rank ``source`` (-1: any).

        ``buf`` None receives a message of any size into memory of its size
        (the request's ``message()``).
        """
        if buf is None:
            return self._engine.irecv_alloc(source, tag, self.context + slot)
        return self._engine.irecv(buf, source, tag, self.context + slot)

    def probe(self, source: int, tag: int, slot: int, block: bool) -> Envelope | None:
        """Return the status of a matching message not yet received (wait if ``block``),
        or None."""
        if block:
            return self._engine.probe(source, tag, self.context + slot)
        return self._engine.iprobe(source, tag, self.context + slot)


class MixedLanes(EngineLanes):
    """A communicator some of whose peers are in this process's site MPI job.

    Messages to and from those go through the site's MPI (``mpi``, a
    :class:`coc.comm.sitempi.MPIComm`), the rest through the engine; a receive from any
    source, or of unknown size, probes both.
    """

    direct = False

    def __init__(self, engine: native.Engine, context: int, mpi: sitempi.MPIComm) -> None:
        super().__init__(engine, context)
        self.mpi = mpi

    def via_mpi(self, target: int) -> bool:
        return target in self.mpi.rank_of

    def isend(self, buf: Any, target: int, tag: int, slot: int) -> Part:
        if target not in self.mpi.rank_of:
            return super().isend(buf, target, tag, slot)
        if type(buf) is list:             # MPI has no gather of raw bytes: join once
            buf = b"".join(buf)
        return self.mpi.isend(buf, target, tag, slot)

    def irecv(self, buf: Any, source: int, tag: int, slot: int) -> Part:
        if source < 0 or source in self.mpi.rank_of:
            return self.mpi.irecv(buf, source, tag, slot)
        return super().irecv(buf, source, tag, slot)

    def probe(self, source: int, tag: int, slot: int, block: bool) -> Envelope | None:
        while True:                       # poll both transports
            st: Envelope | None = None
            if source < 0 or source not in self.mpi.rank_of:
                st = super().probe(source, tag, slot, False)
            if st is None and (source < 0 or source in self.mpi.rank_of):
                st = self.mpi.iprobe(source, tag, slot)
            if st is not None or not block:
                return st
            sitempi.pause()


def _open(self_id: int, secret: bytes | None = None, **options: Any) -> native.Engine:
    return native.Engine(self_id, secret, **options)


def _listen_options(**more: Any) -> dict[str, Any]:
    from coc.ports import environ_port_range
    return {"listen_host": os.environ.get("COC_LISTEN_HOST", "127.0.0.1"),
            "port_range": environ_port_range(os.environ), **more}


def open_under_coc_run() -> tuple[Port, Joined]:
    """Open the engine with coc-run's credentials and do the rendezvous; return (port, me).

    ``me`` holds ``rank``, ``size``, ``routes`` and ``placement`` (see ``coc.rendezvous``).
    """
    from coc import rendezvous
    me = rendezvous.credentials()
    if me["self_id"] != me["rank"]:
        raise LaunchError(f"endpoint id {me['self_id']} differs from rank {me['rank']}",
                          rank=me["rank"])
    eng = _open(me["self_id"], keys=me["keys"],
                **_listen_options(spin_ns=int(os.environ.get("COC_SPIN_NS", "0"))))
    try:
        info = rendezvous.rendezvous(eng.address)
        for peer, address in info["peers"].items():
            eng.add_peer(peer, address)
        apply_routes(eng, info["routes"])
        apply_delays(eng, info["delays"])
        apply_wire(eng, info["wire"])
        # Hold a connection to every gateway from the start: a gateway tells the endpoints
        # connected to it when a rank behind it dies, so a rank waiting on a peer it never
        # spoke to still gets PeerLost instead of hanging.
        for gateway in next_hops(info["routes"]):
            eng.connect(gateway)
    except BaseException:
        eng.close()
        raise
    return Port(eng), {"rank": me["rank"], "size": me["size"], "routes": info["routes"],
                       "placement": info.get("placement")}


def open_from_site_mpi() -> tuple[Port, Joined]:
    """Build the job from a plain ``mpiexec`` start; return ``(port, me)`` like coc-run's.

    Ranks, the secret, engine addresses and direct routes all come from the site's MPI;
    ``COC_SITE`` per rank says which ranks share a site.
    """
    w = realmpi.mpi().COMM_WORLD
    secret = w.bcast(secrets.token_bytes(32) if w.rank == 0 else None, root=0)
    eng = _open(w.rank, secret, **_listen_options())
    addresses = w.allgather(eng.address)
    where = w.allgather((os.environ.get("COC_SITE", "local"),
                         os.environ.get("COC_HOST", socket.gethostname())))
    for peer, address in enumerate(addresses):
        if peer != w.rank:
            eng.add_peer(peer, address)
            eng.set_route(peer, [peer])
    routes = parse_routes({peer: [(peer, 1)] for peer in range(w.size) if peer != w.rank})
    return Port(eng), {"rank": w.rank, "size": w.size, "routes": routes, "placement": where}


def open_alone(site: str, host: str) -> tuple[Port, Joined]:
    """Open the engine of a world of one rank (started without coc-run); return (port, me)."""
    return Port(_open(0, secrets.token_bytes(32))), {"rank": 0, "size": 1, "routes": {},
                                                     "placement": [(site, host)]}
