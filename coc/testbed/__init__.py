"""Build a topology as real network namespaces on this machine: ``coc testbed``.

Each host becomes a network namespace, each network a bridge, each interface a veth with the
topology's address; links are shaped with ``tbf`` and no namespace forwards IP, so traffic
crosses sites only through coc's gateway processes. Needs root. See ``docs/testbed.md``.
"""

from coc.errors import TestbedError
from coc.testbed.scale import scale
from coc.testbed.testbed import Testbed, attach, down, testbeds, up

__all__ = ["Testbed", "TestbedError", "up", "down", "attach", "testbeds", "scale"]
