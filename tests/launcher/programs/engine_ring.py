"""Open the real engine with coc-run's credentials, rendezvous, pass a message round a ring."""

import json

from coc._native import engine
from coc.rendezvous import credentials, rendezvous
from coc.routes import apply_routes

me = credentials()
with engine.Engine(me["self_id"], keys=me["keys"], listen_host="127.0.0.1") as eng:
    info = rendezvous(eng.address)
    for peer, address in info["peers"].items():
        eng.add_peer(peer, address)
    apply_routes(eng, info["routes"])
    rank, size = me["rank"], me["size"]
    buf = bytearray(64)
    received = eng.irecv(buf, source=(rank - 1) % size, tag=7)
    sent = eng.isend(f"hello from {rank}".encode(), (rank + 1) % size, tag=7)
    status = received.wait(timeout=20)
    sent.wait(timeout=20)
    print(json.dumps({"rank": rank, "got": bytes(buf[:status.count]).decode(),
                      "source": status.source, "routes": info["routes"]}), flush=True)
