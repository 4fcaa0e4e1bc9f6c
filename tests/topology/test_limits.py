"""Limits of a topology file: refused with file and line before the work, raised on request.

The files in tests/data/topology-bad pin each message; these tests show what the corpus cannot:
the sizes that used to crash or exhaust the machine, and the overrides.
"""

import os
import shutil
import subprocess
import sys
import warnings

import pytest

from coc.errors import TopologyError
from coc.topology import load, loads, to_dict
from coc.topology.limits import ENVIRONMENT, excerpt, limits, set_limits

ONE_HOST = """
networks:
  lan: {latency: 20us, bandwidth: 1Gbit/s}
sites:
  a:
    hosts:
      - {name: n1, interfaces: [lan]}
"""


@pytest.fixture
def raised():
    """Let a test change the limits; restore them afterwards."""
    before = limits()
    yield set_limits
    set_limits(**vars(before))


def _coc(*args, env=None, timeout=120):
    command = shutil.which("coc")
    command = [command] if command else [sys.executable, "-m", "coc.cli"]
    return subprocess.run(command + list(args), capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_nesting_that_crashed_the_yaml_parser_is_an_error_with_a_line(tmp_path):
    # 50 000 levels made `coc topo check` die of SIGSEGV (the parser's recursion).
    path = tmp_path / "deep.yaml"
    path.write_text("networks: {}\ndescription:\n  " + "[" * 50_000 + "]" * 50_000 + "\n")
    done = _coc("topo", "check", str(path))
    assert done.returncode == 1, done.stderr
    assert f"{path}:3: error: the YAML nests more than 64 levels" in done.stderr
    assert "Traceback" not in done.stderr


def test_depth_limit_can_be_raised(raised):
    text = ONE_HOST + "description: " + "[" * 80 + "]" * 80 + "\n"
    with pytest.raises(TopologyError, match="nests more than 64 levels"):
        loads(text)
    raised(depth=100)
    with pytest.raises(TopologyError, match="description must be text, not list"):
        loads(text)


def test_alias_bomb_message_stays_short_even_when_aliases_are_allowed(raised):
    # With the alias limit out of the way the error still quotes only an excerpt
    # (it used to quote all 387 million strings: a 312 MB message).
    raised(alias_nodes=10**12)
    with pytest.raises(TopologyError) as info:
        load(os.path.join(os.path.dirname(__file__), "..", "data", "topology-bad",
                          "alias-bomb-interfaces.yaml"))
    assert "unknown network [" in str(info.value)
    assert len(str(info.value)) < 300


def test_description_alias_bomb_is_refused_by_the_cli_show(tmp_path):
    bad = os.path.join(os.path.dirname(__file__), "..", "data", "topology-bad",
                       "alias-bomb-description.yaml")
    done = _coc("topo", "show", bad)
    assert done.returncode != 0
    assert "aliases add more than 100000 nodes" in done.stderr


def test_override_through_the_environment_reaches_the_command(tmp_path):
    path = tmp_path / "big-node.yaml"
    path.write_text(ONE_HOST.replace("{name: n1,", "{name: n1, slots: 100000,"))
    assert _coc("topo", "check", str(path)).returncode == 1
    done = _coc("topo", "check", str(path), env={ENVIRONMENT: "slots=200000"})
    assert done.returncode == 0, done.stderr


def test_bad_environment_value_is_an_error_naming_the_variable(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(ONE_HOST)
    done = _coc("topo", "check", str(path), env={ENVIRONMENT: "slot=5"})
    assert done.returncode == 1
    assert "COC_TOPOLOGY_LIMITS: bad item 'slot=5': expected name=number" in done.stderr
    assert "Traceback" not in done.stderr


def test_hosts_and_networks_per_file(raised):
    raised(hosts=3, networks=2)
    loads(ONE_HOST.replace("name: n1", "name: 'n[1-3]'"))
    with pytest.raises(TopologyError, match=r"^the file has more than 3 hosts") as info:
        loads(ONE_HOST.replace("name: n1", "name: 'n[1-4]'"))
    assert info.value.line == 7
    many = ONE_HOST.replace("  lan:", "  x: {latency: 1us, bandwidth: 1Gbit/s}\n"
                                      "  y: {latency: 1us, bandwidth: 1Gbit/s}\n  lan:")
    with pytest.raises(TopologyError, match="the file has 3 networks, more than the limit "
                                            "networks=2") as info:
        loads(many)
    assert info.value.line == 2


def test_host_range_over_several_brackets_is_counted_before_expanding(raised):
    raised(host_range=1000)
    with pytest.raises(TopologyError, match=r"stands for 1000000 names"):
        loads(ONE_HOST.replace("name: n1", "name: 'r[1-1000]n[1-1000]'"))


def test_name_length(raised):
    with pytest.raises(TopologyError, match="name has 300 characters, more than the limit "
                                            "name_length=255") as info:
        loads(ONE_HOST.replace("name: n1", "name: " + "n" * 300))
    assert info.value.line == 7


def test_document_size(tmp_path, raised):
    path = tmp_path / "t.yaml"
    path.write_text(ONE_HOST)
    raised(document_bytes=50)
    with pytest.raises(TopologyError, match="the file has more than 50 bytes"):
        load(path)
    with pytest.raises(TopologyError, match="the document has 1.. bytes, more than the limit "
                                            "document_bytes=50"):
        loads(ONE_HOST)


def test_a_network_keyed_by_a_number_is_named_by_that_number():
    text = """
networks:
  5: {latency: 20us, bandwidth: 1Gbit/s}
  6: {latency: 20us, bandwidth: 1Gbit/s}
sites:
  a:
    hosts:
      - {name: n1, interfaces: [5]}
      - {name: n2, interfaces: [{network: 6}]}
      - {name: g, role: gateway, interfaces: [5, 6]}
links: []
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = loads(text)
    assert sorted(G["g"]) == ["5", "6"] and list(G["n1"]) == ["5"]
    assert to_dict(G)["networks"].keys() == {"5", "6"}


def test_excerpt_never_walks_a_huge_value():
    shared = ["x" * 1000]
    for _ in range(30):          # 2**30 leaves, shared: repr() would never finish
        shared = [shared, shared]
    assert len(excerpt(shared)) <= limits().excerpt
    assert excerpt("short") == "'short'"


def test_values_yaml_cannot_build_are_errors_with_short_messages():
    huge_tag = "a: !" + "x" * 100_000 + " 1\n"
    with pytest.raises(TopologyError, match="constructor for the tag") as info:
        loads(huge_tag, file="t.yaml")
    assert len(str(info.value)) <= 4 * limits().excerpt + 10
    huge_int = ONE_HOST.replace("{name: n1,", "{name: n1, slots: " + "9" * 10_000 + ",")
    with pytest.raises(TopologyError, match="^t.yaml: YAML value error: Exceeds the limit"):
        loads(huge_int, file="t.yaml")
