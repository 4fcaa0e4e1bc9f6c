"""The Python face of a testbed: build it, run commands in its hosts, find addresses, remove it."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from os import PathLike
from typing import Any

import networkx as nx

from coc.testbed import build, firewall, netns, shaping, state
from coc.errors import TestbedError
from coc.testbed.scale import scale as scale_topology

__all__ = ["Testbed", "up", "down", "attach", "testbeds"]


class Testbed:
    """A topology built as network namespaces on this machine.

    Made by :func:`up` (or :func:`attach` for one already up). Use it as a context manager
    to remove the testbed when the block ends, failure or not.

    Attributes
    ----------
    name : str
        The testbed's name; its namespaces are ``coc:<name>:<host>``.
    state : dict
        The recorded state (see :mod:`coc.testbed.state`).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, record: dict[str, Any]) -> None:
        self.state = record
        self.name = record["name"]

    def __repr__(self) -> str:
        return (f"<Testbed {self.name!r}: {len(self.hosts)} hosts, "
                f"{len(self.state['networks'])} networks>")

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @property
    def hosts(self) -> list[str]:
        """The host names, in the topology's order."""
        return list(self.state["hosts"])

    @property
    def offered(self) -> dict[str, bool]:
        """{qdisc kind: bool}: what the kernel offered when the testbed was built."""
        return dict(self.state["offered"])

    def emulation(self) -> dict[str, tuple[bool, str]]:
        """Return {property: (emulated, how)} for bandwidth, latency and isolation."""
        return shaping.emulation(self.state["offered"])

    def _host(self, host: str) -> dict[str, Any]:
        try:
            return self.state["hosts"][host]
        except KeyError:
            raise TestbedError(f"testbed {self.name!r} has no host {host!r} (hosts: "
                               f"{', '.join(self.hosts)})") from None

    def namespace(self, host: str) -> str:
        """Return the name of ``host``'s network namespace."""
        return self._host(host)["namespace"]

    def interfaces(self, host: str) -> list[dict[str, Any]]:
        """Return ``host``'s interfaces: dicts with name, dev, network, address, prefixlen."""
        return [dict(i) for i in self._host(host)["interfaces"]]

    def address(self, host: str, network: str | None = None) -> str:
        """Return ``host``'s address on ``network`` (may be omitted if it has one interface)."""
        interfaces = self._host(host)["interfaces"]
        if network is None and len(interfaces) == 1:
            return interfaces[0]["address"]
        for i in interfaces:
            if i["network"] == network:
                return i["address"]
        on = ", ".join(i["network"] for i in interfaces)
        if network is None:
            raise TestbedError(f"host {host!r} has several interfaces ({on}): name the network")
        raise TestbedError(f"host {host!r} has no interface on network {network!r} (it is on "
                           f"{on})")

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """Return the command line that runs ``argv`` in ``host``'s namespace (for spawners)."""
        return netns.exec_argv(self.namespace(host), list(argv))

    def exec(self, host: str, argv: Sequence[str], **kwargs: Any
             ) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``host``'s namespace and wait: ``subprocess.run`` with ``kwargs``."""
        return subprocess.run(self.argv(host, argv), **kwargs)

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` in ``host``'s namespace: ``subprocess.Popen`` with ``kwargs``."""
        return subprocess.Popen(self.argv(host, argv), **kwargs)

    def latency(self, a: str, b: str) -> float:
        """Return the one-way latency (seconds) the topology gives between hosts ``a`` and ``b``.

        Half of each end's network latency plus the latency of the links between the two
        networks: the figure to hand ``Engine.set_peer_delay`` where the kernel cannot emulate
        latency. Hosts with no direct path (only through gateways) are an error: delay each
        hop separately.
        """
        nets = self.state["networks"]
        joined: nx.Graph = nx.Graph()
        joined.add_nodes_from(nets)
        joined.add_weighted_edges_from((*link["between"], link["latency"] or 0)
                                       for link in self.state["links"])
        best: float | None = None
        for ia in self._host(a)["interfaces"]:
            reach = nx.single_source_dijkstra_path_length(joined, ia["network"])
            for ib in self._host(b)["interfaces"]:
                if ib["network"] in reach:
                    t = ((nets[ia["network"]]["latency"] or 0) / 2 + reach[ib["network"]]
                         + (nets[ib["network"]]["latency"] or 0) / 2)
                    best = t if best is None else min(best, t)
        if best is None:
            raise TestbedError(f"hosts {a!r} and {b!r} share no network: their traffic goes "
                               "through gateways, so delay each hop separately")
        return best

    def block_inbound(self, host: str, networks: list[str] | None = None,
                      ports: tuple[int, int] | None = None) -> None:
        """Make ``host`` refuse connections from outside on ``networks`` (all by default).

        A real nftables rule in the host's namespace drops connection attempts arriving on
        those interfaces (limited to ``ports``, ``(low, high)``, when given); connections the
        host makes itself still work. :meth:`unblock` removes the rules.
        """
        devs = [i["dev"] for i in self._host(host)["interfaces"]
                if networks is None or i["network"] in networks]
        firewall.block_inbound(self.namespace(host), devs, ports)

    def unblock(self, host: str) -> None:
        """Remove the rules :meth:`block_inbound` (or ``outbound_only``) put on ``host``."""
        firewall.clear(self.namespace(host))

    def missing(self) -> list[str]:
        """Return the testbed's namespaces that no longer exist (empty when it is intact)."""
        present = set(netns.namespaces())
        expected = [self.state["infra"]] + [h["namespace"] for h in self.state["hosts"].values()]
        return [ns for ns in expected if ns not in present]

    def down(self) -> dict[str, Any]:
        """Remove the testbed (idempotent); return what :func:`down` returns."""
        return down(self.name)


def _graph(topology: nx.Graph | str | PathLike[str]) -> nx.Graph:
    if isinstance(topology, nx.Graph):
        return topology
    from coc.topology import load  # a file or library name; the loader validates it

    return load(topology)


def up(topology: nx.Graph | str | PathLike[str], name: str | None = None,
       scale: int | None = None) -> Testbed:
    """Build ``topology`` (a graph, file or library name) as namespaces; return a :class:`Testbed`.

    Parameters
    ----------
    topology : networkx.Graph or str or os.PathLike
        A topology graph as :func:`coc.topology.load` returns it, or what it accepts.
    name : str, optional
        The testbed's name (default: the topology's name). A testbed of that name already up
        or left over by a crash is removed first.
    scale : int, optional
        Keep at most this many compute hosts per site and switch (see
        :func:`coc.testbed.scale`).

    Raises
    ------
    TestbedError
        Not root, a tool missing or failing, or an address the topology cannot hold.
    """
    netns.require_root("up")
    G = _graph(topology)
    if scale is not None:
        G = scale_topology(G, scale)
    name = name or G.graph.get("name")
    if not name:
        raise TestbedError("the topology has no name: pass name=")
    return Testbed(build.build(G, name))


def down(name: str) -> dict[str, Any]:
    """Remove testbed ``name`` and everything it made; return counts and the time it took."""
    netns.require_root("down")
    return build.destroy(name)


def testbeds() -> list[str]:
    """Return the names of the testbeds recorded on this machine."""
    return state.recorded()


def attach(name: str | None = None) -> Testbed:
    """Return the :class:`Testbed` named ``name`` (default: the only one recorded)."""
    if name is None:
        recorded = testbeds()
        if len(recorded) != 1:
            raise TestbedError("no testbed is up" if not recorded else
                               f"several testbeds are up ({', '.join(recorded)}): name one")
        name = recorded[0]
    record = state.load(name)
    if record is None:
        raise TestbedError(f"no testbed named {name!r} is up (recorded: "
                           f"{', '.join(testbeds()) or 'none'})")
    return Testbed(record)
