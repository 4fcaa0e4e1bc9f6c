"""The impersonation attack of issue 16, from inside a real job (4 ranks over two sites).

Rank 1 (site a) is the attacker: it holds only what coc-run issued to it (its keys, the
peers' addresses). It opens a second engine claiming rank 3's id — a rank of site b, so
that rank 2 (site b), which unpickles objects from other sites in restricted mode, would
take its pickle as local and run it — and a third claiming its own id again (a second
connection for an id that is connected). Both are refused at site a's gateway; then it
sends its pickle as itself, and rank 2 refuses it. Ranks 0 and 3, the honest owners of the
ids around the attack, keep working. argv[1]: a file the pickle would create if it ran.
"""

import os
import pickle
import sys

from checks import Checks

import coc
from coc._native import engine as native
from coc.comm import transport
from coc.errors import AuthenticationError, CocError
from coc import rendezvous

MARKER = sys.argv[1]
TIMEOUT = 60.0

stolen = {}                       # what a compromised rank can see of its own rendezvous
_real_rendezvous = rendezvous.rendezvous


def _spy(address, environ=None):
    info = _real_rendezvous(address, environ)
    stolen.update(info)
    return info


rendezvous.rendezvous = _spy
comm = coc.init()
rank = comm.rank
ok = Checks(comm)


class Evil:
    """Runs a shell command wherever it is unpickled by plain pickle."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


def claim(self_id, keys, payload):
    """Open an engine claiming ``self_id`` with ``keys``; send ``payload`` to rank 2 through
    site a's gateway; return the error the send ended with (None: it left this engine)."""
    gateway = stolen["routes"][2]["small"][0][0]
    with native.Engine(self_id, keys=keys, listen_host="127.0.0.1") as eng:
        eng.add_peer(gateway, stolen["peers"][gateway])
        eng.set_route(2, [gateway])
        try:
            eng.isend(payload, 2, tag=7, context=comm._context + transport.OBJ).wait(TIMEOUT)
        except CocError as exc:
            return exc
        return None


# The second claim must meet rank 1's own connection to site a's gateway, open at the
# gateway. Each rank dials its gateways at start without waiting; rank 3 answers only once
# rank 1's message reached it, which the gateway forwarded from that connection after
# checking its proof. (An answer alone proves less: the gateway may dial rank 1 itself.)
if rank == 1:
    comm.send("before the attack", 3, tag=11)
    ok.equal("rank 3 heard rank 1 before the attack", comm.recv(source=3, tag=11), "heard")
elif rank == 3:
    ok.equal("rank 1 before the attack", comm.recv(source=1, tag=11), "before the attack")
    comm.send("heard", 1, tag=11)
if rank == 1:
    mine = rendezvous.credentials()["keys"]
    gateway = stolen["routes"][2]["small"][0][0]
    ok.equal("no secret in the welcome", sorted(rendezvous.credentials()),
             ["job_id", "keys", "rank", "self_id", "size"])
    ok.equal("keys for direct peers only", sorted(mine), [0, gateway])
    forged = b"P" + pickle.dumps(Evil())
    as_3 = claim(3, {gateway: mine[gateway]}, forged)
    ok.true(f"claiming rank 3 fails authentication ({as_3!r})",
            isinstance(as_3, AuthenticationError))
    claim(1, mine, forged)   # proves rank 1's key, so it may get out: the gateway drops it
    comm.send("attacked", 3, tag=9)
    comm.send(Evil(), 2, tag=8)              # as itself: a rank of another site
elif rank == 2:
    coc.comm.set_unpickler("restricted")
    ok.equal("rank 3's message is rank 3's", comm.recv(source=3, tag=7), "from the real 3")
    ok.raises("the attacker's pickle is refused", pickle.UnpicklingError, comm.recv,
              source=1, tag=8)
    ok.equal("rank 0 still heard", comm.recv(source=0, tag=5), "rank 0 still here")
    comm.send("rank 2 answers", 0, tag=6)
    ok.true("the pickle never ran", not os.path.exists(MARKER))
    ok.true("nothing else came from rank 1", not comm.iprobe(source=1, tag=7))
elif rank == 3:
    ok.equal("attack over", comm.recv(source=1, tag=9), "attacked")
    comm.send("from the real 3", 2, tag=7)
elif rank == 0:
    comm.send("rank 0 still here", 2, tag=5)
    ok.equal("rank 0 answered", comm.recv(source=2, tag=6), "rank 2 answers")
comm.barrier()
ok.true("ran", True)
ok.report(pid=os.getpid())
