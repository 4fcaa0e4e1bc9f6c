"""Print the variables a rank sees whose names start with COC_, PMI_ or TEST_, as JSON."""

import json
import os

print(json.dumps({k: v for k, v in os.environ.items()
                  if k.startswith(("COC_", "PMI_", "TEST_"))}, sort_keys=True))
