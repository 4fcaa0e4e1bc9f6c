"""Firewall rules inside a testbed host's namespace: make a site accept no inbound connections.

Real sites often let their nodes connect out but accept nothing from outside (the case
MPICH-GP's NAT-plus-proxy was built for). The testbed makes that real with nftables: a rule in
the host's namespace drops every TCP segment that opens a connection (SYN without ACK)
arriving on the chosen interfaces, while the answers to connections the host makes itself
(SYN+ACK) still pass. The rules live in the namespace and go with it when the testbed is
taken down. ``topology`` keys ``outbound_only`` are applied when the testbed is built;
tests plant others with :meth:`coc.testbed.Testbed.block_inbound`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable

from coc.testbed import netns
from coc.errors import TestbedError

__all__ = ["block_inbound", "clear", "TABLE"]

#: The nftables table coc's rules live in (one per namespace).
TABLE = "coc_testbed"


def _require_nft() -> None:
    if shutil.which("nft") is None:
        raise TestbedError("blocking inbound connections needs `nft` (Debian/Ubuntu package "
                           "nftables) on PATH")


def block_inbound(namespace: str, devs: Iterable[str],
                  ports: tuple[int, int] | None = None) -> None:
    """Drop connection attempts (TCP SYN) arriving on ``devs`` in ``namespace``.

    ``ports`` (``(low, high)``) limits the rule to those destination ports (a blocked port
    range); None blocks every port.
    """
    _require_nft()
    match = "" if ports is None else f"tcp dport {ports[0]}-{ports[1]} "
    lines = [f"add table inet {TABLE}",
             f"add chain inet {TABLE} input {{ type filter hook input priority 0 ; "
             "policy accept ; }"]
    lines += [f'add rule inet {TABLE} input iifname "{dev}" {match}'
              "tcp flags & (syn | ack) == syn drop" for dev in devs]
    netns.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"],
              input="\n".join(lines) + "\n", what=f"firewall in namespace {namespace}")


def clear(namespace: str) -> None:
    """Remove coc's firewall rules from ``namespace`` (nothing when there are none)."""
    _require_nft()
    netns.run(["ip", "netns", "exec", namespace, "nft", "delete", "table", "inet", TABLE],
              what=f"firewall in namespace {namespace}", check=False)
