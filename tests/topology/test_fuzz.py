"""Fuzzing the topology loader: any text gives a Topology or a TopologyError, never anything else.

Hypothesis builds YAML shapes around the topology's own keys and words (so the loader gets past
its first checks and into the model and the validator), and also raw text and bytes.
A run is bounded: ``COC_FUZZ_EXAMPLES`` examples per test (default 150, what CI runs);
docs/security.md has the figures of a longer run.
"""

import os
import warnings

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coc.errors import TopologyError
from coc.topology import Topology, loads
from coc.topology.yamlfile import decode

EXAMPLES = int(os.environ.get("COC_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, derandomize=EXAMPLES <= 150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = ["networks", "sites", "hosts", "name", "interfaces", "network", "address", "latency",
         "bandwidth", "subnet", "scope", "public", "private", "role", "gateway", "compute",
         "slots", "dedicated", "hostname", "login", "spawner", "ssh", "links", "between",
         "technology", "wan", "lan", "a", "b", "n[1-4]", "n[01-10,12]", "-x", "10.0.0.0/24",
         "255.255.255.255", "10.0.0.1", "20us", "1ms", "10Gbit/s", "1e20", "defaults",
         "forward_cost", "description", "<<"]
SCALARS = st.one_of(st.sampled_from(WORDS), st.integers(-2, 2**70), st.booleans(), st.none(),
                    st.floats(allow_nan=True), st.text(max_size=20))
SHAPES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.sampled_from(WORDS), inner, max_size=6)),
    max_leaves=40)


def _network():
    return st.fixed_dictionaries({"latency": st.sampled_from(["20us", "1ms", 0, -1, "x"]),
                                  "bandwidth": st.sampled_from(["1Gbit/s", 0, "1 parsec"])},
                                 optional={"subnet": st.sampled_from(["10.0.0.0/30",
                                                                      "10.0.0.0/24", "bad"]),
                                           "scope": st.sampled_from(["public", "private", 3])})


def _host(networks):
    return st.fixed_dictionaries(
        {"name": st.sampled_from(["n1", "n[1-3]", "g", "a[01-02]", "", "n[3-1]", "x[1-9]y[1-9]"]),
         "interfaces": st.lists(st.one_of(st.sampled_from(networks), SHAPES), max_size=3)},
        optional={"role": st.sampled_from(["gateway", "compute", "login", 5]),
                  "slots": st.one_of(st.integers(-1, 10**6), SCALARS),
                  "hostname": st.sampled_from(["h.example.org", "-oX", "a b", "h[1-3]"]),
                  "dedicated": st.booleans()})


TOPOLOGIES = st.lists(st.sampled_from(["lan", "wan", "5", "x"]), min_size=1, max_size=3,
                      unique=True).flatmap(lambda nets: st.fixed_dictionaries({
                          "networks": st.fixed_dictionaries({n: _network() for n in nets}),
                          "sites": st.dictionaries(st.sampled_from(["a", "b", "c"]),
                                                   st.fixed_dictionaries({"hosts": st.lists(
                                                       _host(nets), min_size=1, max_size=4)}),
                                                   min_size=1, max_size=3)},
                          optional={"links": st.lists(st.fixed_dictionaries(
                              {"between": st.lists(st.sampled_from(nets), max_size=3),
                               "latency": st.just("1ms"), "bandwidth": st.just("1Gbit/s")}),
                              max_size=2), "extra": SHAPES}))


def _loads_or_topology_error(text):
    """Load ``text``; only a Topology or a TopologyError may come out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            assert isinstance(loads(text, file="fuzz.yaml"), Topology)
        except TopologyError as exc:
            assert str(exc).startswith("fuzz.yaml")
            assert len(str(exc)) < 2000


@FUZZ
@given(TOPOLOGIES)
def test_topology_shapes(data):
    _loads_or_topology_error(yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(SHAPES)
def test_any_yaml_shape(data):
    _loads_or_topology_error(yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(st.lists(st.sampled_from(list("[]{}:,-&*!|>'\"#%@`?\n  abn01") + WORDS + ["9" * 5000]),
                max_size=80).map("".join))
def test_yaml_punctuation(text):
    _loads_or_topology_error(text)


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes(data):
    try:
        text = decode(data, file="fuzz.yaml")
    except TopologyError:
        return
    _loads_or_topology_error(text)
