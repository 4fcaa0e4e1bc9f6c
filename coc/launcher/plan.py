"""The plan of a job: which rank runs where, which gateway daemons, routes, and spawners.

:func:`make_plan` computes it from a topology and the command line; ``--dry-run`` prints it
with :func:`format_plan`; :class:`~coc.launcher.control.Job` carries it out. Every process
of the job has an *endpoint id* for the engine: ranks ``0 .. size-1``, then one id per
gateway daemon.
"""

import secrets
import sys
from dataclasses import dataclass, field
from functools import cached_property

from coc import keys, topology
from coc.errors import LaunchError
from coc.launcher import latency, placement as placing, wire as marking
from coc.launcher.environment import rank_environment
from coc.launcher.spawners import spawner_for
from coc.pycommand import python_argv
from coc.topology.routing import Direct
from coc.ports import PORT_RANGE_VARIABLE, format_port_range
from coc.topology.ports import host_port_range
from coc.topology.tables import LARGE_MESSAGE
from coc.topology.units import format_size, format_time

__all__ = ["GatewayDaemon", "Plan", "make_plan", "format_plan"]

#: The module a gateway daemon runs (``python -m coc.gateway``).
GATEWAY_MODULE = "coc.gateway"
#: The variable telling a rank's engine what to listen on (read by ``coc.init()``).
LISTEN_HOST = "COC_LISTEN_HOST"
_WILDCARD = "tcp://0.0.0.0:"
#: The size classes of route tables handed to engines, and the size each is computed for:
#: the engine sends a message up to its eager limit, and the envelope (RTS) of a larger one,
#: by the "small" table, and the bytes of a rendezvous transfer by the "large" one.
SIZE_CLASSES = {"small": 0, "large": LARGE_MESSAGE}


@dataclass(frozen=True)
class GatewayDaemon:
    """One gateway daemon: its endpoint id and the gateway host it runs on."""

    endpoint: int
    site: str
    host: str


@dataclass
class Plan:
    """Everything ``coc-run`` decided before starting anything (``--dry-run`` prints it)."""

    job_id: str
    topology: object                       # the coc.topology graph
    command: list                          # argv every rank runs
    placements: list                       # coc.launcher.placement.Placement per rank
    gateway_hosts: list                    # gateway hosts on routes between rank hosts
    gateways: list                         # GatewayDaemon per daemon started
    spawners: dict                         # {site: spawner kind} for every site used
    exports: dict = field(default_factory=dict)   # -x variables
    hosts_from: str = "topology"           # where the usable hosts came from
    warnings: list = field(default_factory=list)  # the topology's TopologyWarnings
    tables: object = None                  # coc.topology.route_tables of the topology
    settings: dict = field(default_factory=dict)  # {site: site settings} (profiles, login)
    emulation: object = None               # coc.launcher.latency.Emulation, or None
    port_overrides: dict = field(default_factory=dict)  # {site: (low, high)}: --port-range

    @property
    def size(self):
        """Return the number of ranks."""
        return len(self.placements)

    @property
    def sites(self):
        """Return the sites the job uses, in rank order, then sites with only gateways."""
        used = dict.fromkeys(p.site for p in self.placements)
        used.update(dict.fromkeys(g.site for g in self.gateways))
        return list(used)

    def gateway(self, endpoint):
        """Return the :class:`GatewayDaemon` with ``endpoint``."""
        return self.gateways[endpoint - self.size]

    def endpoint(self, source):
        """Return the endpoint id of ``("rank", r)`` or ``("gateway", id)``."""
        return source[1]

    def site_of(self, source):
        """Return the site a ``("rank", r)`` or ``("gateway", id)`` runs on."""
        kind, ident = source
        return self.placements[ident].site if kind == "rank" else self.gateway(ident).site

    @cached_property
    def _endpoint_hosts(self):
        return {**{p.rank: p.host for p in self.placements},
                **{g.endpoint: g.host for g in self.gateways}}

    @cached_property
    def _daemon_on(self):
        return {g.host: g.endpoint for g in self.gateways}

    def _next_hops(self, src_host, dst_host, dest, size=0):
        """Return ``[[endpoint, weight], ...]`` where traffic of ``size`` to ``dest`` goes first.

        Weights are the route tables' load shares as integers (per mille). A plan made with
        ``start_gateways=False`` (never run: placement and failure tests) routes directly.
        """
        hops = self.tables.next_hops(src_host, dst_host, size) if src_host != dst_host else []
        if not hops or any(hop != dst_host and hop not in self._daemon_on for hop, _ in hops):
            return [[dest, 1]]
        return [[dest if hop == dst_host else self._daemon_on[hop], max(1, round(weight * 1000))]
                for hop, weight in hops]

    def route_table(self, endpoint):
        """Return ``{destination endpoint: HOPS}`` for one endpoint.

        Destinations are the ranks; a next hop equal to the destination means "directly".
        ``HOPS`` is ``[[next hop endpoint, weight], ...]`` when both size classes route
        alike, else ``{"small": [...], "large": [...]}`` (docs/wire-protocol.md).
        """
        src_host = self._endpoint_hosts[endpoint]
        table = {}
        for p in self.placements:
            if p.rank != endpoint:
                small, large = (self._next_hops(src_host, p.host, p.rank, size)
                                for size in SIZE_CLASSES.values())
                table[p.rank] = small if small == large else {"small": small, "large": large}
        return table

    @cached_property
    def direct_peers(self):
        """Return ``{endpoint: set of endpoints}``: who exchanges frames with whom directly.

        A pair is direct when either one's route table names the other as a next hop (for
        either size class). These are the pairs whose keys a rank is issued
        (:mod:`coc.keys`): it can reach no other endpoint, nor be reached by one.
        """
        ranks_on = {}
        for p in self.placements:
            ranks_on.setdefault(p.host, []).append(p.rank)
        ends_on = {}
        for end, host in self._endpoint_hosts.items():
            ends_on.setdefault(host, []).append(end)
        direct = {end: set() for end in self._endpoint_hosts}
        for host, ends in ends_on.items():      # routes depend on the two hosts only
            near = set()
            for dst_host, ranks in ranks_on.items():
                for size in SIZE_CLASSES.values():
                    for hop, _ in self._next_hops(host, dst_host, None, size):
                        near.update(ranks if hop is None else (hop,))
            for end in ends:
                for peer in near - {end}:
                    direct[end].add(peer)
                    direct[peer].add(end)
        return direct

    def welcome(self, rank, secret):
        """Return what rank ``rank`` learns first: its ids and the keys issued to it.

        Never the job's secret: only K(rank, peer) for its direct peers (:mod:`coc.keys`).
        """
        gateways = {g.endpoint for g in self.gateways}
        return {"rank": rank, "size": self.size, "self_id": rank, "job_id": self.job_id,
                "keys": keys.issue(secret, rank, self.direct_peers[rank], gateways)}

    @cached_property
    def _direct(self):
        return {label: Direct(self.topology, size) for label, size in SIZE_CLASSES.items()}

    def hop_networks(self, endpoint):
        """Return ``{next hop endpoint: network}``: where ``endpoint`` dials each next hop.

        The network is the one the model's direct step to the next hop's host uses for the
        size class that sends through it. A next hop used by both classes whose steps take
        different networks is dialed on the *large* class's network: one connection per
        pair of endpoints carries both classes, and the bulk bytes of large messages gain
        more from the faster network than envelopes lose in latency (docs/topology.md).
        Next hops on the same host (shared memory) are left out.
        """
        host = self._endpoint_hosts[endpoint]
        chosen = {}
        for hops in self.route_table(endpoint).values():
            by_class = hops if isinstance(hops, dict) else dict.fromkeys(SIZE_CLASSES, hops)
            for label in SIZE_CLASSES:          # small first: large overrides it
                for hop, _ in by_class[label]:
                    peer = self._endpoint_hosts[hop]
                    if peer != host:
                        net = self._direct[label].network(host, peer)
                        if net is not None:
                            chosen[hop] = net
        return chosen

    def address(self, host, network):
        """Return ``host``'s address on ``network``: the topology's, else its testbed's."""
        attrs = self.topology.edges[host, network] if self.topology.has_edge(host, network) \
            else {}
        if attrs.get("address"):
            return attrs["address"]
        bed = getattr(self.spawner(self.topology.nodes[host]["site"]), "testbed", None)
        if bed is not None:
            return bed.address(host, network)
        raise LaunchError(f"host {host!r} has no address on network {network!r}: give its "
                          "interface an address (or the network a subnet) in the topology",
                          site=self.topology.nodes[host]["site"])

    def delays(self, endpoint):
        """Return ``{next hop endpoint: seconds}``: the emulated latency of each hop (non-zero)."""
        if self.emulation is None:
            return {}
        host = self._endpoint_hosts[endpoint]
        found = {hop: self.emulation.delay(host, net)
                 for hop, net in self.hop_networks(endpoint).items()}
        return {hop: t for hop, t in found.items() if t > 0}

    def wire(self, endpoint):
        """Return ``{next hop endpoint: {"encrypt": bool, "compress": name}}`` for each hop
        whose network the topology marks with ``encrypt`` or ``compress`` (the network
        :meth:`hop_networks` dials it on); other hops carry frames raw."""
        found = {}
        for hop, net in self.hop_networks(endpoint).items():
            attrs = self.topology.nodes[net]
            encrypt, compress = bool(attrs.get("encrypt")), attrs.get("compress", "none")
            if encrypt or compress != "none":
                found[hop] = {"encrypt": encrypt, "compress": compress}
        return found

    @cached_property
    def _spawners_made(self):
        return {}

    def spawner(self, site):
        """Return the spawner that reaches ``site``, with the site's settings (made once)."""
        made = self._spawners_made
        if made.get(site, (None,))[0] != self.spawners[site]:
            made[site] = (self.spawners[site], spawner_for(
                self.spawners[site], site, self.settings.get(site), self.topology))
        return made[site][1]

    def use_spawner(self, site, spawner):
        """Make ``site`` start through ``spawner`` (``--batch`` wraps the site's own)."""
        self._spawners_made[site] = (self.spawners[site], spawner)

    def port_range(self, host):
        """Return the ``(low, high)`` ports engines on ``host`` listen in, or None (any).

        ``--port-range`` for the host's site wins over the topology's ranges
        (:func:`coc.topology.ports.host_port_range`).
        """
        site = self.topology.nodes[host]["site"]
        return host_port_range(self.topology, host, self.port_overrides.get(site))

    def rank_env(self, rank):
        """Return the variables rank ``rank`` gets on top of its site's environment."""
        p = self.placements[rank]
        env = {**self.exports, **rank_environment(p, self.size, self.job_id,
                                                  self.topology.graph.get("file")),
               LISTEN_HOST: self.spawner(p.site).listen_host(p.host)}
        ports = self.port_range(p.host)
        if ports:
            env[PORT_RANGE_VARIABLE] = format_port_range(ports)
        return env

    def peers_for(self, endpoint, peers):
        """Return ``peers`` as ``endpoint`` must dial them: without itself, wildcards resolved.

        An engine listening on every interface (``0.0.0.0``) is reached at its host's address
        on the network the route uses for the hop (:meth:`hop_networks`), never simply the
        first network two hosts share. Peers ``endpoint`` never dials keep their address.
        Endpoints of other sites that accept no inbound connections are left out: they make
        the link themselves (:attr:`dials`).
        """
        networks = self.hop_networks(endpoint)
        site = self.site_of_endpoint(endpoint)
        resolved = {}
        for ident, address in peers.items():
            if ident == endpoint or (self.outbound_only(ident)
                                     and self.site_of_endpoint(ident) != site):
                continue            # it accepts nothing from here: it dials in (dials)
            if _WILDCARD in address and ident in networks:
                where = self.address(self._endpoint_hosts[ident], networks[ident])
                address = address.replace(_WILDCARD, f"tcp://{where}:")
            resolved[ident] = address
        return resolved

    def site_of_endpoint(self, endpoint):
        """Return the site endpoint ``endpoint`` (a rank or gateway daemon) runs on."""
        return self.topology.nodes[self._endpoint_hosts[endpoint]]["site"]

    def host_of(self, endpoint):
        """Return the host endpoint ``endpoint`` runs on."""
        return self._endpoint_hosts[endpoint]

    def outbound_only(self, endpoint):
        """Return True when ``endpoint``'s host accepts no inbound connections from outside.

        The topology's ``outbound_only`` on the host (a gateway) or on its site.
        """
        host = self._endpoint_hosts[endpoint]
        site = self.topology.nodes[host]["site"]
        return bool(self.topology.nodes[host].get("outbound_only")
                    or (self.settings.get(site) or {}).get("outbound_only"))

    def describe_link(self, dialer, peer):
        """Return ``"a-gw -> b-gw over network wan (tcp port range 41000-41100 on b-gw)"``."""
        host, other = self._endpoint_hosts[dialer], self._endpoint_hosts[peer]
        net = self.hop_networks(dialer).get(peer)
        ports = self.port_range(other)
        return (f"{host} -> {other}" + (f" over network {net}" if net else "")
                + (f" (port range {format_port_range(ports)} on {other})" if ports else ""))

    @cached_property
    def dials(self):
        """Return ``{gateway endpoint: [peer endpoints]}``: the links made before ranks start.

        Every next hop across a site boundary is a link. Between two gateway daemons the
        link is made (and checked) before any rank starts: dialed by the end whose peer
        accepts inbound connections — the outbound-only end when there is one, else the
        lower endpoint id — so a blocked link stops the job before it begins.

        Raises
        ------
        LaunchError
            When no direction can work: both ends outbound-only, or an outbound-only end
            that is a rank (only gateway daemons dial out before the job starts), naming
            the link.
        """
        daemons = set(self._daemon_on.values())
        scanned = list(daemons)
        if any(self.outbound_only(e) for e in self._endpoint_hosts):
            scanned += range(self.size)     # a rank's direct link to such a site is an error
        links = {}
        for endpoint in scanned:
            for peer in self.hop_networks(endpoint):
                if self.site_of_endpoint(peer) != self.site_of_endpoint(endpoint):
                    links.setdefault(tuple(sorted((endpoint, peer))), None)
        dials = {}
        for a, b in links:
            out_a, out_b = self.outbound_only(a), self.outbound_only(b)
            if out_a and out_b:
                raise LaunchError(
                    f"no direction works for the link {self.describe_link(a, b)}: site "
                    f"{self.site_of_endpoint(a)} and site {self.site_of_endpoint(b)} are both "
                    "outbound_only (accept no inbound connections); let one of them accept "
                    "connections on its gateway (and open its port range)")
            if (out_a or out_b) and not {a, b} <= daemons:
                raise LaunchError(
                    f"the link {self.describe_link(a, b)} joins an outbound_only site to a "
                    "rank of another site directly; only gateway daemons can dial out, so "
                    "route the sites through gateways (or drop outbound_only)")
            if not {a, b} <= daemons:
                continue
            dialer, peer = (b, a) if out_b else (a, b)
            dials.setdefault(dialer, []).append(peer)
        return dials

    def agent_job(self, site, secret, grace):
        """Return the ``job`` message for ``site``'s agent."""
        spawner = self.spawner(site)
        command = [spawner.python if self.command[0] == sys.executable else self.command[0],
                   *self.command[1:]]
        used = [p.host for p in self.placements if p.site == site]
        used += [g.host for g in self.gateways if g.site == site]
        hosts = {host: argv for host in dict.fromkeys(used)
                 if (argv := spawner.host_agent_argv(host)) is not None}

        def on(host, argv):          # a host agent runs it as is; else the site agent's way
            return list(argv) if host in hosts else spawner.host_argv(host, argv)

        return {
            "type": "job", "job_id": self.job_id, "site": site, "grace": grace, "hosts": hosts,
            "hold_ranks": bool(self.dials),
            "ranks": [{"rank": p.rank, "host": p.host, "argv": on(p.host, command),
                       "env": self.rank_env(p.rank), "stdin": p.rank == 0,
                       "welcome": self.welcome(p.rank, secret)}
                      for p in self.placements if p.site == site],
            "gateways": [{"endpoint": g.endpoint, "host": g.host,
                          "argv": on(g.host, python_argv(GATEWAY_MODULE, python=spawner.python)),
                          "config": {"self_id": g.endpoint, "secret": secret.hex(),
                                     "listen_host": spawner.listen_host(g.host),
                                     "port_range": list(self.port_range(g.host)
                                                        or (0, 0)),
                                     "routes": self.route_table(g.endpoint),
                                     "delays": {str(k): v for k, v in
                                                self.delays(g.endpoint).items()},
                                     "wire": {str(k): v for k, v in
                                              self.wire(g.endpoint).items()}}}
                         for g in self.gateways if g.site == site],
        }

    def rendezvous_answer(self, rank, peers):
        """Return what rank ``rank`` receives once every endpoint's address is known.

        ``peers`` maps every endpoint (ranks and gateway daemons) to its address;
        ``placement`` lists ``[site, host]`` of every rank, so ranks need not gather it;
        ``delays`` the emulated latency toward each next hop (:mod:`coc.launcher.latency`).
        """
        return {"peers": self.peers_for(rank, peers), "routes": self.route_table(rank),
                "placement": [[p.site, p.host] for p in self.placements],
                "delays": self.delays(rank), "wire": self.wire(rank)}


def make_plan(G, command, *, n=None, site_counts=(), limits=None, hosts_from="topology",
              oversubscribe=False, spawners=None, exports=None, job_id=None,
              start_gateways=True, settings=None, delays=None, testbed=False,
              port_ranges=None, markings=None):
    """Return the :class:`Plan` for running ``command`` on topology ``G``.

    Parameters
    ----------
    G : networkx.Graph
        The topology.
    command : list of str
        What every rank runs.
    n : int, optional
        Number of ranks (default: the ``site_counts`` total, or every usable slot).
    site_counts : list of (site, count)
        ``--site`` requests, in command-line order.
    limits : list of (host, slots or None), optional
        Usable hosts (``--host``, ``--hostfile``, a scheduler allocation); ``hosts_from``
        says which, for the printed plan.
    spawners : dict, optional
        ``--spawner SITE=KIND`` overrides of the topology's per-site spawners.
    start_gateways : bool, optional
        Start gateway daemons (default). Inter-site traffic can only cross through them;
        ``False`` is for plans that are never run (tests of placement and failures).
    settings : dict, optional
        ``{site: {key: value}}`` site settings (profiles, ``--testbed``); the topology's
        ``login`` and ``spawner`` of a site fill what they leave out.
    delays : dict, optional
        ``--delay`` overrides ``{network: seconds}``: the model uses them and the engines
        emulate them (:mod:`coc.launcher.latency`).
    testbed : bool, optional
        The job runs under ``--testbed``: declared WAN-class latencies are emulated.
    port_ranges : dict, optional
        ``--port-range`` overrides ``{site: (low, high)}`` (``None`` as key: every site).
    markings : dict, optional
        ``--encrypt``/``--compress`` overrides of networks' ``encrypt`` and ``compress``
        (:func:`coc.launcher.wire.parse_markings`): the engines apply them.
    """
    G = latency.override(G, delays or {})
    G, marking_warnings = marking.override(G, markings or {})
    available = placing.available_slots(G, limits)
    counts = placing.site_counts(available, n, list(site_counts), oversubscribe)
    placements = placing.place_ranks(available, counts)
    tables = topology.route_tables(G)
    gateway_hosts = placing.place_gateways(G, placements, tables)
    daemons = [GatewayDaemon(len(placements) + i, G.nodes[h]["site"], h)
               for i, h in enumerate(gateway_hosts if start_gateways else ())]
    overrides = dict(spawners or {})
    for site in overrides:
        if site not in topology.sites(G):
            raise LaunchError(f"--spawner: unknown site (topology has: "
                                      f"{', '.join(topology.sites(G))})", site=site)
    plan = Plan(job_id or secrets.token_hex(4), G, list(command), placements, gateway_hosts,
                daemons, {}, dict(exports or {}), hosts_from, warnings=marking_warnings,
                tables=tables)
    if delays or testbed:
        plan.emulation = latency.Emulation(G, delays or {}, testbed)
    plan.port_overrides = _port_overrides(G, port_ranges or {})
    site_attrs = G.graph.get("sites", {})
    for site in plan.sites:
        given = {k: v for k, v in (site_attrs.get(site) or {}).items() if v is not None}
        plan.settings[site] = {**given, **(settings or {}).get(site, {})}
    plan.spawners = {site: overrides.get(site) or plan.settings[site].get("spawner")
                     or "local" for site in plan.sites}
    for site in plan.sites:
        plan.spawner(site)               # an unknown or unavailable spawner fails here
    plan.dials  # noqa: B018 - computing them fails here for a link no direction can make
    return plan


def _port_overrides(G, port_ranges):
    """Return ``{site: (low, high)}`` from ``--port-range`` values (key None: every site)."""
    known = topology.sites(G)
    for site in port_ranges:
        if site is not None and site not in known:
            raise LaunchError(f"--port-range: unknown site (topology has: {', '.join(known)})",
                              site=site)
    every = port_ranges.get(None)
    return {site: port_ranges.get(site, every) for site in known
            if port_ranges.get(site, every) is not None}


def format_plan(plan):
    """Return the plan as the text ``coc-run --dry-run`` prints."""
    G = plan.topology
    lines = [f"job {plan.job_id}: {_ranks(plan.size)} of: "
             f"{' '.join(plan.command)}",
             f"topology: {G.graph.get('name')} ({G.graph.get('file') or 'in memory'})",
             f"hosts from: {plan.hosts_from}"]
    if plan.exports:
        lines.append(f"exported: {' '.join(sorted(plan.exports))}")
    lines.append("placement:")
    for site in plan.sites:
        ranks = [p for p in plan.placements if p.site == site]
        lines.append(f"  site {site} (spawner {plan.spawners[site]}): {_ranks(len(ranks))}")
        for host in dict.fromkeys(p.host for p in ranks):
            on_host = [p.rank for p in ranks if p.host == host]
            span = f"rank {on_host[0]}" if len(on_host) == 1 else \
                f"ranks {on_host[0]}-{on_host[-1]}"
            if on_host != list(range(on_host[0], on_host[-1] + 1)):
                span = "ranks " + ",".join(map(str, on_host))
            lines.append(f"    {host:<12} {span}")
    if plan.gateway_hosts:
        lines.append("gateways:")
        for host in plan.gateway_hosts:
            attrs = G.nodes[host]
            daemon = next((g for g in plan.gateways if g.host == host), None)
            state = (f"daemon endpoint {daemon.endpoint}" if daemon
                     else "no daemon (the gateway daemon needs the built engine)")
            kind = "dedicated" if attrs["dedicated"] else "shared"
            lines.append(f"  {host:<14} site {attrs['site']}, {kind}, {state}")
    else:
        lines.append("gateways: none needed")
    lines.extend(_route_lines(plan))
    lines.extend(f"topology warning: {w}" for w in plan.warnings)
    return "\n".join(lines) + "\n"


def _ranks(count):
    return f"{count} rank" if count == 1 else f"{count} ranks"


def _route_lines(plan):
    """Return the plan's lines showing, per ordered pair of sites with ranks and size class,
    the route between their first hosts: hosts, the network of each hop, the predicted time.
    """
    first = {}
    for p in plan.placements:
        first.setdefault(p.site, p.host)
    pairs = [(a, b) for a in first for b in first if a != b]
    if not pairs:
        return []
    lines = ["routes between sites (first host of each; small: up to the eager limit and "
             "envelopes, large: rendezvous bytes, predicted for "
             f"{format_size(SIZE_CLASSES['large'])}):"]
    for a, b in pairs:
        for label, size in SIZE_CLASSES.items():
            r = topology.route(plan.topology, first[a], first[b], size)
            path = first[a] + "".join(f" -[{'+'.join(h.networks)}]-> {h.next_host}"
                                      for h in r.hops)
            lines.append(f"  {a} -> {b} {label:<5} {path}  ({format_time(r.time, 3)})")
    marked = marking.describe(plan.topology)
    if marked:
        lines.append("record layer (encrypt/compress) on hops over:")
        lines.extend(marked)
    if plan.emulation is not None:
        emulated = plan.emulation.describe()
        lines.append("emulated latency (engine delays):" if emulated
                     else "emulated latency: none")
        lines.extend(emulated)
    return lines
