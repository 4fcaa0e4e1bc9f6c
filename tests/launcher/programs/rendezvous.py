"""Call the rank side of the rendezvous with a made-up address and print what came back.

Also lists every place (own and agent's command line and environment) one of the rank's
keys leaked to.
"""

import json
import os

from coc.rendezvous import rendezvous

rank = int(os.environ["COC_RANK"])
info = rendezvous(f"tcp://127.0.0.1:{20000 + rank}")
info["keys"] = {str(peer): [key.hex(), gateway] for peer, (key, gateway) in info["keys"].items()}
info["leaks"] = []
for who in ("self", str(os.getppid())):
    for what in ("cmdline", "environ"):
        shown = open(f"/proc/{who}/{what}", "rb").read()
        if any(key.encode() in shown or bytes.fromhex(key) in shown
               for key, _ in info["keys"].values()):
            info["leaks"].append(f"{who}/{what}")
print(json.dumps(info, sort_keys=True))
