"""Say where each rank of a coc job runs: rank, size, site and host.

Run it with ``coc-run -n 8 --tag-output python examples/hello.py``.
"""
import os

print(f"rank {os.environ['COC_RANK']} of {os.environ['COC_SIZE']} "
      f"on site {os.environ['COC_SITE']}, host {os.environ['COC_HOST']}")
