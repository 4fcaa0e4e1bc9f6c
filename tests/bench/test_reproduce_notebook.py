"""examples/reproductions.ipynb runs top to bottom: topology drawn, seed001 rerun and plotted.

The notebook builds a testbed, so it needs root. It does not skip: without root (or
network namespaces) it fails and says why, so a CI run can never pass it silently.
"""

import os
from pathlib import Path

import nbclient
import nbformat
import pytest
from hang_bounds import scaled

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "reproductions.ipynb"


@pytest.mark.root
def test_reproductions_notebook_runs():
    if os.geteuid() != 0:
        pytest.fail("examples/reproductions.ipynb builds a testbed of network namespaces and "
                    "needs root (CI runs as root); run the tests as root")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=scaled(240), kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs), "no topology drawing"
    text = "".join(o.get("text", "") for o in outputs)
    assert "| 128 B |" in text, "no ping-pong table in the report"
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2, "no plots"
