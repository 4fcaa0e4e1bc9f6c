"""Time reading, validating and placing on a large topology file: 100 000 hosts, 500 000 networks.

The file is synthetic but valid: ``--sites`` sites of ``--hosts`` hosts on their own LAN, one
or two gateways each on a shared WAN, and enough unused networks to reach ``--networks``
(a generator that writes every network of a machine room, used or not, makes such files).
Placement puts one rank on every slot (``coc-run`` without ``-n``) and, separately, deals
half as many ranks as slots over the sites one at a time.
Prints the size of the text and the wall-clock and CPU time of each step, the median and the
spread over ``--repeat`` runs. The limits of coc.topology.limits stay at their defaults.

Run: ``python benchmarks/topology_validate.py [--sites 1000 --hosts 100 --networks 500000]``
"""

import argparse
import statistics
import sys
import time
import warnings

from coc.launcher import placement
from coc.topology import from_dict, validate
from coc.topology.yamlfile import read_yaml


def synthesize(n_sites, n_hosts, n_networks):
    """Return the YAML text of the synthetic topology."""
    lines = ["name: synthetic-large", "networks:",
             "  wan: {technology: wan, latency: 1ms, bandwidth: 1Gbit/s, scope: public}"]
    lines += [f"  lan{s}: {{latency: 20us, bandwidth: 10Gbit/s, subnet: 10.{s // 250}."
              f"{s % 250}.0/24}}" for s in range(n_sites)]
    lines += [f"  spare{i}: {{latency: 20us, bandwidth: 10Gbit/s}}"
              for i in range(max(0, n_networks - n_sites - 1))]
    lines.append("sites:")
    for s in range(n_sites):
        lines += [f"  s{s}:", "    hosts:",
                  f"      - {{name: \"s{s}n[1-{n_hosts}]\", slots: 2, interfaces: [lan{s}]}}",
                  f"      - {{name: \"s{s}gw[1-{1 + s % 2}]\", role: gateway, "
                  f"interfaces: [lan{s}, wan]}}"]
    return "\n".join(lines) + "\n"


def _timed(step):
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  ({wall:.2f} s wall, {cpu:.2f} s cpu)", file=sys.stderr, flush=True)  # progress
    return result, wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--networks", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = synthesize(args.sites, args.hosts, args.networks)
    rows = {"parse YAML (with limit checks)": [], "build the model": [], "validate": [],
            "place a rank on every slot": [], "deal half as many ranks to sites": []}
    for _ in range(args.repeat):
        data, wall, cpu = _timed(lambda: read_yaml(text))
        rows["parse YAML (with limit checks)"].append((wall, cpu))
        G, wall, cpu = _timed(lambda: from_dict(data, check=False))
        rows["build the model"].append((wall, cpu))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found, wall, cpu = _timed(lambda: validate(G))
        rows["validate"].append((wall, cpu))
        available = placement.available_slots(G)
        placements, wall, cpu = _timed(lambda: placement.place_ranks(
            available, placement.site_counts(available)))
        rows["place a rank on every slot"].append((wall, cpu))
        _, wall, cpu = _timed(lambda: placement.place_ranks(
            available, placement.site_counts(available, len(placements) // 2)))
        rows["deal half as many ranks to sites"].append((wall, cpu))
    print(f"{G}; {len(text) / 1e6:.1f} MB of YAML; {len(found)} warnings; "
          f"{len(placements)} slots; "
          f"{args.repeat} runs: median [min-max] seconds")
    for step, values in rows.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(f"  {step + ':':34s} wall {statistics.median(walls):6.2f} "
              f"[{min(walls):.2f}-{max(walls):.2f}]  cpu {statistics.median(cpus):6.2f} "
              f"[{min(cpus):.2f}-{max(cpus):.2f}]")


if __name__ == "__main__":
    main()
