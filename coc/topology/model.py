"""The topology model: a networkx graph of hosts and networks built from YAML or a dict."""

from __future__ import annotations

import difflib
import importlib.resources
import ipaddress
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import networkx as nx

from coc.errors import TopologyError
from coc.topology.hostlist import HostlistError, expand, natural_key
from coc.topology.limits import exceeded, excerpt, limits, shorten
from coc.ports import format_port_range, parse_port_range
from coc.topology.units import format_bandwidth, format_time, parse_bandwidth, parse_time
from coc.topology.yamlfile import File as _File
from coc.topology.yamlfile import decode, line_of, read_yaml

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc from Python 3.11

    from coc.topology.routing import Route

__all__ = ["Topology", "load", "loads", "from_dict", "to_dict", "sites", "hosts", "networks",
           "placement_slots", "library_names", "library_path",
           "TECHNOLOGIES", "ROLES", "SCOPES", "SPAWNERS", "DEFAULT_FORWARD_COST"]

TECHNOLOGIES = ("loopback", "shm", "ethernet", "fast-ethernet", "gigabit-ethernet",
                "infiniband", "myrinet", "sci", "wan")
ROLES = ("compute", "gateway", "frontend")
SCOPES = ("private", "public")
COMPRESSORS = ("none", "zstd", "lz4")  # a network's ``compress`` (docs/topology.md)
SPAWNERS = ("local", "ssh", "slurm", "pbs", "mpiexec", "netns")
DEFAULT_FORWARD_COST = 10e-6  # seconds a gateway adds to each message it forwards

# A parsed topology file's mapping (coc.topology.yamlfile's Mapping: a dict with lines).
_Data = Mapping[Any, Any]
_Q = TypeVar("_Q")

_ROLE_ALIASES = {"login": "frontend"}
_KEYS = {
    "top level": ("name", "description", "defaults", "networks", "sites", "links"),
    "defaults": ("forward_cost",),
    "network": ("technology", "latency", "bandwidth", "scope", "subnet", "port_range",
                "encrypt", "compress"),
    "site": ("spawner", "login", "hosts", "port_range", "outbound_only"),
    "host": ("name", "slots", "role", "dedicated", "hostname", "forward_cost", "interfaces",
             "outbound_only"),
    "interface": ("network", "name", "address"),
    "link": ("between", "latency", "bandwidth"),
}


class Topology(nx.Graph):
    """A cluster of clusters: plain :class:`networkx.Graph` plus rich display in Jupyter.

    Nodes are hosts (``kind="host"``) and networks (``kind="network"``); edges are
    interfaces (host--network) and links (network--network). See ``docs/topology.md``.

    Examples
    --------
    >>> G = loads('''
    ... networks: {lan: {latency: 20us, bandwidth: 10Gbit/s}}
    ... sites: {a: {hosts: [{name: "a[1-2]", interfaces: [lan]}]}}
    ... ''')
    >>> print(G)
    Topology 'topology': 1 site, 2 hosts, 1 network
    """

    def __str__(self) -> str:
        counts = [(len(sites(self)), "site"), (len(hosts(self)), "host"),
                  (len(networks(self)), "network")]
        return (f"Topology {excerpt(self.graph.get('name'))}: "
                + ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts))

    def __repr__(self) -> str:
        return f"<{self}>"

    def _repr_svg_(self) -> str | None:
        return _svg(self)

    def show_route(self, src: str, dst: str, size: int | str = 0) -> RouteView:
        """Return the route from ``src`` to ``dst``, shown highlighted on the drawing in Jupyter.

        Examples
        --------
        >>> G = load("two-sites")
        >>> print(G.show_route("a1", "b1"))  # doctest: +NORMALIZE_WHITESPACE
        a1 -> a-gw over a-lan 20us
        a-gw -> b-gw over wan 1.01ms
        b-gw -> b1 over b-lan 30us
        total 1.06ms for 0B
        """
        from coc.topology.routing import route

        return RouteView(self, route(self, src, dst, size))


class RouteView:
    """A route together with its topology, drawn with the route highlighted in Jupyter."""

    def __init__(self, graph: nx.Graph, route: Route) -> None:
        self.graph, self.route = graph, route

    def __str__(self) -> str:
        return str(self.route)

    __repr__ = __str__  # the text form Jupyter shows when drawing is not available

    def _repr_svg_(self) -> str | None:
        return _svg(self.graph, route=self.route)


def _svg(graph: nx.Graph, route: Route | None = None) -> str | None:
    """Return the SVG drawing of ``graph``, or None when drawing is not available."""
    try:
        from coc.topology.draw import to_svg

        return to_svg(graph, route=route)
    except ImportError:  # matplotlib (an optional dependency) or the drawing module missing
        return None


def _error(message: str, data: object = None, key: object = None, *, file: _File = None,
           name: str | None = None) -> TopologyError:
    """Return a TopologyError placed at ``key`` of the mapping ``data`` (when it has lines)."""
    return TopologyError(message, file=file, line=line_of(data, key) if data is not None
                         else None, name=name)


def _check_keys(data: object, kind: str, where: str, file: _File, parent: object = None,
                key: object = None) -> None:
    """Raise if the mapping ``data`` has a key that ``kind`` does not allow (a typo).

    ``parent`` and ``key`` place the error when ``data`` is no mapping (and has no line).
    """
    if not isinstance(data, dict):
        what = "nothing" if data is None else type(data).__name__
        raise _error(f"{where}: expected a mapping of keys, not {what}", parent, key,
                     file=file)
    allowed = _KEYS[kind]
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {excerpt(close[0])}?)" if close else ""
            raise _error(f"{where}: unknown key {excerpt(key)}{hint}; allowed: "
                         f"{', '.join(sorted(allowed))}", data, key, file=file)


def _quantity(parse: Callable[[Any], _Q], data: _Data, key: str, where: str, file: _File,
              default: _Q | None = None) -> _Q:
    """Parse ``data[key]`` with ``parse`` (a units function), naming the place on error."""
    if key not in data:
        if default is None:
            raise _error(f"{where}: missing {excerpt(key)}", data, file=file)
        return default
    try:
        return parse(data[key])
    except TopologyError as exc:
        raise _error(f"{where}: {key} {exc.message}", data, key, file=file) from None


def _expand(expression: str, data: _Data, key: str, file: _File) -> list[str]:
    """Expand a host list, re-raising its error with file and line."""
    try:
        names = expand(expression)
    except HostlistError as exc:
        raise HostlistError(exc.message, file=file, line=line_of(data, key)) from None
    for name in names:
        _check_name(name, f"{key} {excerpt(name)}", data, key, file)
    return names


def _check_name(name: str, where: str, data: _Data, key: object, file: _File) -> None:
    """Raise if ``name`` is longer than the limit ``name_length``."""
    if len(name) > limits().name_length:
        raise _error(exceeded(f"{where}: the name has", "name_length", len(name)), data, key,
                     file=file)


def _reference(value: object) -> object:
    """Return a network named in a host or link as the text a network key becomes.

    A network keyed ``5`` is the node ``"5"``, so ``[5]`` must name it too.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _port_range(data: _Data, where: str, file: _File) -> tuple[int, int] | None:
    """Return ``data['port_range']`` as ``(low, high)``, or None when not given."""
    if data.get("port_range") is None:
        return None
    try:
        return parse_port_range(data["port_range"])
    except TopologyError as exc:
        raise _error(f"{where}: {exc.message}", data, "port_range", file=file) from None


def _flag(data: _Data, key: str, where: str, file: _File) -> bool | None:
    """Return ``data[key]`` (true or false; None when not given), naming the place on error."""
    value = data.get(key)
    if value is not None and not isinstance(value, bool):
        raise _error(f"{where}: {key} must be true or false, not {excerpt(value)}", data, key,
                     file=file)
    return value


def _compress(data: _Data, where: str, file: _File) -> str:
    """Return ``data['compress']`` (one of :data:`COMPRESSORS`; ``"none"`` when not given)."""
    value = data.get("compress", "none")
    if value is False:      # YAML's ``compress: no``
        value = "none"
    if value not in COMPRESSORS:
        raise _error(f"{where}: compress must be one of {', '.join(COMPRESSORS)}, not "
                     f"{excerpt(value)}", data, "compress", file=file)
    return value


def _address(text: object, data: _Data, key: str, where: str,
             file: _File) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Return ``text`` as an ip address, or raise naming the place."""
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        raise _error(f"{where}: {excerpt(text)} is not an IP address", data, key,
                     file=file) from None


def _add_networks(G: Topology, data: _Data, file: _File) -> None:
    networks_data = data.get("networks")
    if not isinstance(networks_data, dict) or not networks_data:
        raise _error("'networks' must be a mapping of network names to networks", data,
                     "networks", file=file)
    if len(networks_data) > limits().networks:
        raise _error(exceeded("the file has", "networks", len(networks_data)), data,
                     "networks", file=file)
    for name, net in networks_data.items():
        where = f"network {excerpt(name)}"
        _check_name(str(name), where, networks_data, name, file)
        _check_keys(net, "network", where, file, networks_data, name)
        subnet = net.get("subnet")
        if subnet is not None:
            try:
                subnet = str(ipaddress.ip_network(str(subnet)))
            except ValueError as exc:
                raise _error(f"{where}: bad subnet {excerpt(subnet)}: {shorten(str(exc))}",
                             net, "subnet",
                             file=file) from None
        G.add_node(str(name), kind="network", technology=net.get("technology", "ethernet"),
                   latency=_quantity(parse_time, net, "latency", where, file),
                   bandwidth=_quantity(parse_bandwidth, net, "bandwidth", where, file),
                   scope=net.get("scope", "private"), subnet=subnet, site=None,
                   port_range=_port_range(net, where, file),
                   encrypt=_flag(net, "encrypt", where, file) or False,
                   compress=_compress(net, where, file), line=line_of(networks_data, name))


def _interfaces(G: Topology, entry: _Data, names: list[str], where: str, file: _File
                ) -> Iterator[tuple[str, str, ipaddress.IPv4Address | ipaddress.IPv6Address
                                    | None]]:
    """Yield (network, interface name, first address or None) for one host entry."""
    items = entry.get("interfaces", [])
    if not isinstance(items, list):
        raise _error(f"{where}: 'interfaces' must be a list", entry, "interfaces", file=file)
    seen_networks, seen_names = set(), set()
    for i, item in enumerate(items):
        if isinstance(item, dict):
            _check_keys(item, "interface", f"{where}: interface {i}", file)
            network, ifname, address = item.get("network"), item.get("name"), item.get("address")
        else:
            network, ifname, address = item, None, None
        network = _reference(network)
        ifname = f"eth{i}" if ifname is None else str(ifname)
        if network not in G or G.nodes[network]["kind"] != "network":
            raise _error(f"{where}: unknown network {excerpt(network)}", entry, "interfaces",
                         file=file, name=names[0])
        if network in seen_networks:
            raise _error(f"{where}: two interfaces on network {excerpt(network)}", entry,
                         "interfaces", file=file, name=names[0])
        if ifname in seen_names:
            raise _error(f"{where}: interface name {excerpt(ifname)} used twice", entry,
                         "interfaces", file=file, name=names[0])
        seen_networks.add(network)
        seen_names.add(ifname)
        if address is not None:
            address = _address(address, entry, "interfaces", where, file)
        yield cast(str, network), ifname, address  # a network node's name (checked above)


def _add_hosts(G: Topology, data: _Data, default_forward_cost: float, file: _File) -> None:
    sites_data = data.get("sites")
    if not isinstance(sites_data, dict) or not sites_data:
        raise _error("'sites' must be a mapping of site names to sites", data, "sites",
                     file=file)
    G.graph["site_lines"] = {}
    for site, site_data in sites_data.items():
        _check_name(str(site), f"site {excerpt(site)}", sites_data, site, file)
        _check_keys(site_data, "site", f"site {excerpt(site)}", file, sites_data, site)
        G.graph["site_lines"][str(site)] = line_of(sites_data, site)
        site = str(site)
        G.graph["sites"][site] = {key: site_data.get(key) for key in ("spawner", "login")}
        G.graph["sites"][site]["port_range"] = _port_range(site_data, f"site {excerpt(site)}",
                                                           file)
        G.graph["sites"][site]["outbound_only"] = _flag(site_data, "outbound_only",
                                                        f"site {excerpt(site)}", file)
        entries = site_data.get("hosts")
        if not isinstance(entries, list) or not entries:
            raise _error(f"site {excerpt(site)}: 'hosts' must be a non-empty list", site_data,
                         "hosts", file=file, name=site)
        for entry in entries:
            if not isinstance(entry, dict):
                _check_keys(entry, "host", f"site {excerpt(site)}: host entry", file,
                            site_data, "hosts")
            _add_host_entry(G, site, entry, default_forward_cost, file)


def _add_host_entry(G: Topology, site: str, entry: _Data, default_forward_cost: float,
                    file: _File) -> None:
    """Add the host(s) of one entry in a site's ``hosts`` list."""
    _check_keys(entry, "host", f"site {excerpt(site)}: host entry", file)
    if "name" not in entry:
        raise _error(f"site {excerpt(site)}: host entry without 'name'", entry, file=file)
    where = f"host {excerpt(entry['name'])}"
    names = _expand(entry["name"], entry, "name", file)
    hostnames = names
    if entry.get("hostname") is not None:
        hostnames = _expand(entry["hostname"], entry, "hostname", file)
        if len(hostnames) != len(names):
            raise _error(f"{where}: {len(names)} hosts but {len(hostnames)} hostnames",
                         entry, "hostname", file=file)
    role = entry.get("role", "compute")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    forward_cost = _quantity(parse_time, entry, "forward_cost", where, file,
                             default=default_forward_cost)
    interfaces = list(_interfaces(G, entry, names, where, file))
    hosts_before = len(G) - G.graph["network_count"]
    if hosts_before + len(names) > limits().hosts:
        raise _error(exceeded("the file has", "hosts"), entry, "name", file=file)
    for network, _, address in interfaces:
        if address is not None and int(address) + len(names) - 1 >= 1 << address.max_prefixlen:
            raise _error(f"{where}: {len(names)} hosts from address {address} on network "
                         f"{excerpt(network)} run past the last IPv{address.version} address",
                         entry, "interfaces", file=file, name=names[0])
    line = line_of(entry)
    for i, (name, hostname) in enumerate(zip(names, hostnames)):
        if name in G:
            other = G.nodes[name]
            what = "host" if other["kind"] == "host" else "network"
            raise _error(f"host {excerpt(name)}: name already used by a {what} (line "
                         f"{other['line']})", entry, "name", file=file, name=name)
        G.add_node(name, kind="host", site=site, slots=entry.get("slots", 1), role=role,
                   dedicated=entry.get("dedicated", False), hostname=str(hostname),
                   forward_cost=forward_cost, line=line,
                   outbound_only=_flag(entry, "outbound_only", where, file) or False)
        for network, ifname, address in interfaces:
            G.add_edge(name, network, kind="interface", name=ifname,
                       address=None if address is None else str(address + i))


def _add_links(G: Topology, data: _Data, file: _File) -> None:
    items = data.get("links", [])
    if not isinstance(items, list):
        raise _error("'links' must be a list", data, "links", file=file)
    for item in items:
        _check_keys(item, "link", "link", file, data, "links")
        between = item.get("between")
        if isinstance(between, list):
            between = [_reference(network) for network in between]
        if (not isinstance(between, list) or len(between) != 2
                or between[0] == between[1]):
            raise _error(f"link: 'between' must name two different networks, not "
                         f"{excerpt(between)}", item, "between", file=file)
        where = f"link {between[0]}--{between[1]}"
        for network in between:
            if network not in G or G.nodes[network]["kind"] != "network":
                raise _error(f"{where}: unknown network {excerpt(network)}", item, "between",
                             file=file, name=network)
        if G.has_edge(*between):
            raise _error(f"{where}: the two networks are already linked", item, "between",
                         file=file)
        G.add_edge(*between, kind="link",
                   latency=_quantity(parse_time, item, "latency", where, file),
                   bandwidth=_quantity(parse_bandwidth, item, "bandwidth", where, file),
                   line=line_of(item))


def _assign_addresses(G: Topology, file: _File) -> None:
    """Give each interface without an address the next free address of its network's subnet."""
    for network, attrs in G.nodes(data=True):
        if attrs["kind"] != "network" or attrs["subnet"] is None:
            continue
        edges = [(host, d) for _, host, d in G.edges(network, data=True)
                 if d["kind"] == "interface"]
        used = {d["address"] for _, d in edges if d["address"] is not None}
        free = (str(a) for a in ipaddress.ip_network(attrs["subnet"]).hosts()
                if str(a) not in used)
        for host, d in edges:
            if d["address"] is None:
                d["address"] = next(free, None)
                if d["address"] is None:
                    raise TopologyError(f"network {excerpt(network)}: subnet {attrs['subnet']} has "
                                        f"no free address left for host {excerpt(host)}",
                                        file=file, line=attrs["line"], name=network)


def from_dict(data: Mapping[str, Any], *, file: str | PathLike[str] | None = None,
              check: bool = True) -> Topology:
    """Build a :class:`Topology` from the parsed contents of a topology file.

    Parameters
    ----------
    data : dict
        The file's contents (see ``docs/topology.md``). Mappings produced by
        :func:`coc.topology.yamlfile.read_yaml` carry line numbers, which errors then name.
    file : str, optional
        The file ``data`` came from, named in errors and kept as ``G.graph["file"]``.
    check : bool, default True
        Run :func:`coc.topology.validate` on the result (warnings are issued).

    Returns
    -------
    Topology

    Raises
    ------
    TopologyError
        On the first mistake, naming file, line and the host, network or site concerned.

    Examples
    --------
    >>> G = from_dict({
    ...     "networks": {"lan": {"latency": "20us", "bandwidth": "10Gbit/s",
    ...                          "subnet": "10.0.0.0/24"}},
    ...     "sites": {"a": {"hosts": [{"name": "n[1-2]", "slots": 4, "interfaces": ["lan"]}]}},
    ... })
    >>> G.nodes["n2"]["slots"], G.edges["n2", "lan"]["address"]
    (4, '10.0.0.2')
    >>> from_dict({"networks": {}, "sites": {}, "netwroks": {}})
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: top level: unknown key 'netwroks' (did you mean 'networks'?); allowed: defaults, description, links, name, networks, sites
    """
    _check_keys(data, "top level", "top level", file)
    for key in ("name", "description"):
        if data.get(key) is not None and not isinstance(data[key], (str, int, float)):
            raise _error(f"top level: {key} must be text, not {type(data[key]).__name__}",
                         data, key, file=file)
    defaults = data.get("defaults") or {}
    _check_keys(defaults, "defaults", "defaults", file)
    forward_cost = _quantity(parse_time, defaults, "forward_cost", "defaults", file,
                             default=DEFAULT_FORWARD_COST)
    G = Topology(name=str(data.get("name") or (Path(file).stem if file else "topology")),
                 description=data.get("description"), file=None if file is None else str(file),
                 forward_cost=forward_cost, sites={})
    _add_networks(G, data, file)
    G.graph["network_count"] = len(G)
    _add_hosts(G, data, forward_cost, file)
    del G.graph["network_count"]
    _add_links(G, data, file)
    for network in networks(G):
        attached = {G.nodes[h]["site"] for h in G[network] if G.nodes[h]["kind"] == "host"}
        G.nodes[network]["site"] = attached.pop() if len(attached) == 1 else None
    _assign_addresses(G, file)
    if check:
        from coc.topology.validate import validate

        validate(G)
    return G


def loads(text: str, *, file: str | PathLike[str] | None = None, check: bool = True) -> Topology:
    """Build a :class:`Topology` from YAML text; errors name ``file`` and the line.

    Examples
    --------
    >>> loads("networks: {lan: {latency: 20us, bandwidth: 1Gbit/s}}\\n"
    ...       "sites: {a: {hosts: [{name: h1, interfaces: [lan-x]}]}}\\n", file="t.yaml")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: t.yaml:2: host 'h1': unknown network 'lan-x'
    """
    data = read_yaml(text, file=file)
    if not isinstance(data, dict):
        raise TopologyError("expected a mapping with 'networks' and 'sites' at the top",
                            file=file, line=1)
    return from_dict(data, file=file, check=check)


def _library_dirs() -> Iterator[Traversable]:
    """Yield the folders that hold the topology library (installed package, then repository)."""
    try:
        yield importlib.resources.files("coc.data.topology")
    except ModuleNotFoundError:
        pass
    repository = Path(__file__).resolve().parents[2] / "topology"
    if repository.is_dir():
        yield repository


def library_names() -> list[str]:
    """Return the names of the topologies in coc's library, sorted.

    Examples
    --------
    >>> "two-sites" in library_names()
    True
    """
    return sorted({entry.name[:-5] for folder in _library_dirs() for entry in folder.iterdir()
                   if entry.name.endswith(".yaml")}, key=natural_key)


def library_path(name: str) -> Path:
    """Return the path of the library topology ``name`` (e.g. ``"two-sites"``).

    Raises
    ------
    TopologyError
        If the library has no such topology (the message lists those it has).

    Examples
    --------
    >>> library_path("two-sites").name
    'two-sites.yaml'
    """
    for folder in _library_dirs():
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return cast(Path, candidate)  # a file on disk in every install coc supports
    raise TopologyError(f"no topology file or library topology named {excerpt(name)}; the library "
                        f"has: {', '.join(library_names()) or 'nothing'}", name=name)


# The docstring repeats from_dict's sections (numpydoc) on purpose: help(load) stands alone.
def load(source: str | PathLike[str], *, check: bool = True) -> Topology:
    """Read a topology file, or a topology of the library by name, into a :class:`Topology`.

    Parameters
    ----------
    source : str or path
        A path to a YAML file, or the name of a library topology such as ``"two-sites"``.
    check : bool, default True
        Validate the result (see :func:`coc.topology.validate`).

    Returns
    -------
    Topology

    Raises
    ------
    TopologyError
        If the file cannot be read or is invalid; the message names file and line.

    Examples
    --------
    >>> G = load("two-sites")
    >>> sites(G), placement_slots(G)["a1"]
    (['a', 'b'], 2)
    """
    path = Path(source)
    if not (path.suffix in (".yaml", ".yml") or path.is_file() or len(path.parts) > 1):
        path = library_path(str(source))
    try:
        with path.open("rb") as stream:
            data = stream.read(limits().document_bytes + 1)
    except OSError as exc:
        raise TopologyError(f"cannot read the topology: {exc.strerror}", file=path) from None
    if len(data) > limits().document_bytes:
        raise TopologyError(exceeded("the file has", "document_bytes"), file=path)
    return loads(decode(data, file=str(path)), file=str(path), check=check)


def _ordered(nodes: Iterable[str]) -> list[str]:
    return sorted(nodes, key=natural_key)


def sites(G: nx.Graph) -> list[str]:
    """Return the site names of ``G`` in sorted order.

    Examples
    --------
    >>> sites(load("two-sites"))
    ['a', 'b']
    """
    return _ordered({d["site"] for _, d in G.nodes(data=True) if d["kind"] == "host"})


def hosts(G: nx.Graph, site: str | None = None, role: str | None = None) -> list[str]:
    """Return the host names of ``G`` in natural order, optionally of one site or role.

    Examples
    --------
    >>> hosts(load("two-sites"), site="a")
    ['a1', 'a2', 'a3', 'a4', 'a-gw']
    >>> hosts(load("two-sites"), role="gateway")
    ['a-gw', 'b-gw']
    """
    return _ordered(n for n, d in G.nodes(data=True) if d["kind"] == "host"
                    and (site is None or d["site"] == site)
                    and (role is None or d["role"] == role))


def networks(G: nx.Graph, site: str | None = None) -> list[str]:
    """Return the network names of ``G``, or those that hosts of ``site`` attach to.

    Examples
    --------
    >>> networks(load("two-sites"), site="a")
    ['a-lan', 'wan']
    """
    if site is None:
        return _ordered(n for n, d in G.nodes(data=True) if d["kind"] == "network")
    return _ordered({net for h in hosts(G, site=site) for net in G[h]})


def placement_slots(G: nx.Graph) -> dict[str, int]:
    """Return ``{host: slots}`` for the hosts that may run ranks.

    Dedicated gateways and hosts with 0 slots are left out.

    Examples
    --------
    >>> slots = placement_slots(load("two-sites"))
    >>> sum(slots.values()), "a-gw" in slots
    (16, False)
    """
    return {h: G.nodes[h]["slots"] for h in hosts(G)
            if not G.nodes[h]["dedicated"] and G.nodes[h]["slots"] > 0}


def _format_network(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {"technology": attrs["technology"], "latency": format_time(attrs["latency"], 15),
           "bandwidth": format_bandwidth(attrs["bandwidth"], 15), "scope": attrs["scope"]}
    if attrs["subnet"] is not None:
        out["subnet"] = attrs["subnet"]
    if attrs.get("port_range"):
        out["port_range"] = format_port_range(attrs["port_range"])
    if attrs.get("encrypt"):
        out["encrypt"] = True
    if attrs.get("compress", "none") != "none":
        out["compress"] = attrs["compress"]
    return out


def to_dict(G: nx.Graph) -> dict[str, Any]:
    """Return the topology as a dict that :func:`from_dict` turns back into an equal graph.

    Each host is written out with explicit interface names and addresses.

    Examples
    --------
    >>> G = load("two-sites")
    >>> data = to_dict(G)
    >>> data["networks"]["wan"]["latency"], data["sites"]["a"]["hosts"][0]["name"]
    ('1ms', 'a1')
    >>> from_dict(data).edges["a1", "a-lan"] == G.edges["a1", "a-lan"]
    True
    """
    data: dict[str, Any] = {
        "name": G.graph.get("name"), "description": G.graph.get("description"),
        "defaults": {"forward_cost": format_time(G.graph["forward_cost"], 15)},
        "networks": {n: _format_network(G.nodes[n]) for n in networks(G)}, "sites": {}}
    for site in sites(G):
        entry = dict(G.graph.get("sites", {}).get(site) or {})
        site_data = {k: v for k, v in entry.items() if v is not None}
        if site_data.get("port_range"):
            site_data["port_range"] = format_port_range(site_data["port_range"])
        site_data["hosts"] = []
        for h in hosts(G, site=site):
            a = G.nodes[h]
            host = {"name": h, "slots": a["slots"], "role": a["role"]}
            if a["dedicated"]:
                host["dedicated"] = True
            if a["hostname"] != h:
                host["hostname"] = a["hostname"]
            if a["forward_cost"] != G.graph["forward_cost"]:
                host["forward_cost"] = format_time(a["forward_cost"], 15)
            if a.get("outbound_only"):
                host["outbound_only"] = True
            host["interfaces"] = [
                {"network": net, "name": d["name"], **({"address": d["address"]}
                                                       if d["address"] else {})}
                for net, d in sorted(G[h].items(), key=lambda e: natural_key(e[1]["name"]))]
            site_data["hosts"].append(host)
        data["sites"][site] = site_data
    links = [{"between": sorted((u, v), key=natural_key),
              "latency": format_time(d["latency"], 15),
              "bandwidth": format_bandwidth(d["bandwidth"], 15)}
             for u, v, d in G.edges(data=True) if d["kind"] == "link"]
    if links:
        data["links"] = sorted(links, key=lambda link: [natural_key(n) for n in link["between"]])
    return data
