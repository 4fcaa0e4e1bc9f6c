"""docs/topology.md stays true: its YAML example loads and its JSON example is real output."""

import json
import re
import warnings
from pathlib import Path

from coc.topology import load, loads, route_tables

DOC = (Path(__file__).resolve().parents[2] / "docs" / "topology.md").read_text()


def test_yaml_example_loads():
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC, re.S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = loads(block, file="docs/topology.md")
    assert G.edges["a-gw", "a-lan"]["address"] == "10.1.0.254"


def test_route_table_example_is_what_two_sites_gives():
    (block,) = re.findall(r"```json\n(.*?)```", DOC, re.S)
    shown = json.loads(block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = route_tables(load("two-sites")).to_dict()
    assert shown["classes"] == real["classes"]
    assert shown["tables"]["small"] == real["tables"]["small"]
