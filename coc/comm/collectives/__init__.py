"""Collective operations: flat algorithms and topology-aware (multi-level) ones.

:mod:`~coc.comm.collectives.flat` runs trees and exchanges over all ranks of a communicator;
:mod:`~coc.comm.collectives.hierarchical` goes within each site first, then one exchange per
pair of sites between site leaders, then within each site again (MPICH-G2's multilevel
collectives). :func:`set_collective_algorithm` chooses; ``"auto"`` picks the multi-level
algorithm when a communicator spans several sites and some site holds several of its ranks.
"""

from coc.comm.collectives.base import (Call, CollectiveMismatchError,
                                       collective_algorithm, set_collective_algorithm)

__all__ = ["Call", "CollectiveMismatchError", "set_collective_algorithm", "collective_algorithm"]
