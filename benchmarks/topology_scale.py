"""Time the topology model on a synthetic 100 sites x 100 hosts cluster of clusters.

Prints the time (wall clock and CPU of this process) to load (from YAML text), validate and
compute all route tables, and the size of the route tables against hosts squared.
Run: python benchmarks/topology_scale.py
"""

import argparse
import time
import warnings

from coc.topology import hosts, loads, route, route_tables, validate
from coc.topology.routing import route_cost


def synthesize(n_sites, n_hosts, shape):
    """Return YAML text: each site a LAN of ``n_hosts`` hosts and 1 or 2 gateways.

    ``shape="wan"``: the gateways also sit on one public WAN. ``shape="ring"``: site i's
    gateways sit on its LAN and on the LAN of site i+1 (mod n), so sites form a ring.
    """
    lines = ["name: synthetic", "networks:"]
    if shape == "wan":
        lines.append("  wan: {technology: wan, latency: 1ms, bandwidth: 1Gbit/s, "
                     "scope: public, subnet: 100.64.0.0/16}")
    for s in range(n_sites):
        lines.append(f"  lan{s}: {{technology: ethernet, latency: 20us, bandwidth: 10Gbit/s, "
                     f"subnet: 10.{s // 200}.{s % 200}.0/24}}")
    lines.append("sites:")
    for s in range(n_sites):
        far = "wan" if shape == "wan" else f"lan{(s + 1) % n_sites}"
        n_gateways = 1 + s % 2
        lines += [f"  s{s}:", "    hosts:",
                  f"      - {{name: \"s{s}n[1-{n_hosts}]\", slots: 2, interfaces: [lan{s}]}}",
                  f"      - {{name: \"s{s}gw[1-{n_gateways}]\", role: gateway, dedicated: true, "
                  f"interfaces: [lan{s}, {far}]}}"]
    return "\n".join(lines) + "\n"


def measure(n_sites, n_hosts, shape, check_routes):
    text = synthesize(n_sites, n_hosts, shape)
    marks = [(time.perf_counter(), time.process_time())]
    G = loads(text, check=False)
    marks.append((time.perf_counter(), time.process_time()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = validate(G)
    marks.append((time.perf_counter(), time.process_time()))
    tables = route_tables(G)
    marks.append((time.perf_counter(), time.process_time()))
    n = len(hosts(G))
    print(f"{shape}: {n_sites} sites x {n_hosts} hosts = {n} hosts, "
          f"{len(hosts(G, role='gateway'))} gateways, {len(tables.classes)} host classes")
    steps = ["load (YAML text -> graph, addresses)", f"validate ({len(found)} warnings)",
             "route tables (small + large)"]
    print(f"  {'':40s} {'wall':>7s} {'cpu':>7s}")
    rows = list(zip(steps, marks, marks[1:])) + [("total", marks[0], marks[-1])]
    for what, (wall0, cpu0), (wall1, cpu1) in rows:
        print(f"  {what + ':':40s} {wall1 - wall0:6.3f}s {cpu1 - cpu0:6.3f}s")
    print(f"  route table entries: {tables.n_entries} for 2 size classes; "
          f"hosts^2 x 2 = {2 * n * n} ({2 * n * n / tables.n_entries:.0f}x more)")
    t4 = time.perf_counter()
    table = tables.host_table(hosts(G)[0])
    print(f"  one host's expanded table: {sum(len(t) for t in table.values())} entries in "
          f"{time.perf_counter() - t4:.3f} s")
    if check_routes:  # spot-check that the tables agree with route()
        names = hosts(G)
        for src, dst in [(names[0], names[-1]), (names[5], names[n // 2])]:
            for label, size in zip(tables.labels, tables.size_classes):
                hop = tables.next_hops(src, dst, size)[0][0]
                r = route(G, src, dst, size)
                assert abs(route_cost(G, [src] + list(route(G, hop, dst, size).hosts), size)
                           - r.time) <= 1e-12 * r.time, (src, dst, label)
        print("  spot check: route tables agree with route()")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--shape", choices=("wan", "ring", "both"), default="both")
    parser.add_argument("--no-check", action="store_true", help="skip the route spot check")
    args = parser.parse_args()
    for shape in (("wan", "ring") if args.shape == "both" else (args.shape,)):
        measure(args.sites, args.hosts, shape, not args.no_check)


if __name__ == "__main__":
    main()
