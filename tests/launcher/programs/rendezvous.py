"""Call the rank side of the rendezvous with a made-up address and print what came back.

Also lists every place (own and agent's command line and environment) the secret leaked to.
"""

import json
import os

from coc.rendezvous import rendezvous

rank = int(os.environ["COC_RANK"])
info = rendezvous(f"tcp://127.0.0.1:{20000 + rank}")
secret = info["secret"].hex()
info["secret"] = secret
info["leaks"] = []
for who in ("self", str(os.getppid())):
    for what in ("cmdline", "environ"):
        if secret.encode() in open(f"/proc/{who}/{what}", "rb").read():
            info["leaks"].append(f"{who}/{what}")
print(json.dumps(info, sort_keys=True))
