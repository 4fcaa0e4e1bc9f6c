"""Shape testbed links with the kernel's queueing disciplines and say what is (not) emulated.

Bandwidth is emulated with ``tbf`` on both ends of every veth, so each direction of every
interface runs at its network's rate. Latency needs ``netem``; where the kernel lacks it (as
on coc's CI machine) latency is *not* emulated, and the engine's user-space delay
(``Engine.set_peer_delay``) stands in for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from coc.testbed import netns

__all__ = ["PROBES", "detect", "tbf_parameters", "qdisc_commands", "emulation"]

# A minimal qdisc of each kind, added to the loopback of a scratch namespace to learn
# whether the kernel offers it.
PROBES = {
    "tbf": "tbf rate 1mbit burst 32kb limit 64kb",
    "htb": "htb",
    "netem": "netem delay 1ms",
}

_BURST_TIME = 0.002       # tbf bucket: 2 ms worth of the rate ...
_BURST_MIN = 128 * 1024   # ... but at least two 64 KiB GSO packets, so tbf never splits them
_BURST_MAX = 16 << 20
_QUEUE_TIME = 0.050       # queue up to 50 ms worth of the rate before dropping ...
_QUEUE_MAX = 16 << 20     # ... and never more than 16 MiB per interface


def detect(namespace: str) -> dict[str, bool]:
    """Return {kind: bool} for each qdisc kind in :data:`PROBES`, tried in ``namespace``."""
    offered = {}
    for kind, args in PROBES.items():
        added = netns.run(["tc", "-n", namespace, "qdisc", "add", "dev", "lo", "root",
                           "handle", "1:", *args.split()], check=False)
        offered[kind] = added.returncode == 0
        if offered[kind]:
            netns.run(["tc", "-n", namespace, "qdisc", "del", "dev", "lo", "root"],
                      what=f"removing the {kind} probe")
    return offered


def tbf_parameters(bandwidth: float) -> tuple[int, int, int]:
    """Return ``(rate_bits, burst_bytes, limit_bytes)`` for a tbf shaping to ``bandwidth`` B/s.

    The bucket holds 2 ms of traffic (at least 128 KiB: veths hand tbf 64 KiB GSO packets)
    and the queue 50 ms more (at most 16 MiB), which measured within 5 % of the rate for
    TCP here from 10 Mbit/s to 10 Gbit/s.

    >>> tbf_parameters(12.5e6)   # 100 Mbit/s
    (100000000, 131072, 756072)
    """
    rate = float(bandwidth)
    burst = int(min(max(rate * _BURST_TIME, _BURST_MIN), _BURST_MAX))
    limit = burst + int(min(rate * _QUEUE_TIME, _QUEUE_MAX))
    return round(rate * 8), burst, limit


def qdisc_commands(dev: str, bandwidth: float | None, delay: float | None,
                   offered: Mapping[str, bool]) -> list[str]:
    """Return the ``tc`` batch lines that shape egress of ``dev`` (bandwidth B/s, delay s).

    ``offered`` is what :func:`detect` found; properties the kernel cannot emulate are left
    out (and reported by :func:`emulation`).

    >>> qdisc_commands("eth0", 12.5e6, 1e-3, {"tbf": True, "netem": False})
    ['qdisc add dev eth0 root handle 1: tbf rate 100000000bit burst 131072 limit 756072']
    """
    lines = []
    shaped = bool(bandwidth) and offered.get("tbf", False)
    if shaped and bandwidth:
        rate, burst, limit = tbf_parameters(bandwidth)
        lines.append(f"qdisc add dev {dev} root handle 1: tbf rate {rate}bit burst {burst} "
                     f"limit {limit}")
    if delay and offered.get("netem", False):
        parent = "parent 1:1" if shaped else "root"
        lines.append(f"qdisc add dev {dev} {parent} handle 10: netem delay "
                     f"{delay * 1e6:.3f}us limit 100000")
    return lines


def emulation(offered: Mapping[str, bool]) -> dict[str, tuple[bool, str]]:
    """Return {property: (emulated, how)} for bandwidth, latency and isolation.

    >>> emulation({"tbf": True, "htb": True, "netem": False})["latency"][0]
    False
    """
    if offered.get("tbf"):
        bandwidth = (True, "tbf on both ends of every veth: each direction of each interface "
                           "at its network's rate, each link at the link's rate")
    else:
        bandwidth = (False, "the kernel has no tbf qdisc: links run at veth speed")
    if offered.get("netem"):
        latency = (True, "netem on both ends of every veth: half the network's latency on "
                         "each, the link's latency on each link end")
    else:
        latency = (False, "the kernel has no netem qdisc, so packets cross at veth speed "
                          "(~10 us); emulate it in user space with the engine's per-peer "
                          "delay: Engine.set_peer_delay(peer, seconds) "
                          "(coc_engine_set_peer_delay), with Testbed.latency(a, b) as the "
                          "figure; see docs/testbed.md")
    isolation = (True, "one namespace per host, one bridge per network, ip_forward=0 and no "
                       "default route in every namespace: only coc gateways join networks")
    return {"bandwidth": bandwidth, "latency": latency, "isolation": isolation}
