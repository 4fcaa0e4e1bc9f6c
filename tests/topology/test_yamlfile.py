"""Reading YAML with lines: the one-pass reader builds what PyYAML's full safe loader builds.

The one-pass reader (coc.topology.yamlfile) makes large topology files fast to read; these
tests hold it to the full loader it replaces, on the features topology files use (with line
numbers compared too) and on random documents, and show that text it leaves to the full
loader (explicit tags, bad anchors, several documents, ...) reads or fails as before.
"""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from coc.errors import TopologyError
from coc.topology import yamlfile
from coc.topology.yamlfile import Mapping, read_yaml


def _shape(value):
    """Return ``value`` as nested tuples that show every type, value and line."""
    if isinstance(value, Mapping):
        return ("mapping", value.line,
                [(_shape(k), value.lines[k], _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value).__name__, repr(value)


def _both(text):
    """Return what the one-pass reader and the full loader make of ``text``."""
    return (yamlfile._read_events(text, "t.yaml"), yamlfile._full_load(text, "t.yaml"))


FEATURES = [
    "networks:\n  lan: {latency: 20us, bandwidth: 10Gbit/s}\nsites:\n  a:\n    hosts:\n"
    "      - {name: 'n[1-4]', slots: 2, interfaces: [lan]}\n      - name: gw\n"
    "        role: gateway\n",
    "a: &x {p: 1, q: [2, 3]}\nb: {<<: *x, q: 4}\nc: *x\n",
    "base: &b {x: 1, w: 0}\nmore: &m {y: 2, x: 3}\nboth:\n  z: 4\n  <<: [*b, *m]\n",
    "inner: &i {k: 1}\nouter: &o {<<: *i, l: 2}\nlast: {<<: *o, m: 3}\n",
    "s: &s hello\nt: *s\nl: &l [1, 2]\nm: [*l, *l]\n",
    "n: ~\nb: yes\nf: 1.5e3\ni: 0x1f\nd: 2001-12-14\nq: '1'\nr: \"x\\ty\"\ne:\n",
    "3: three\ntrue: yes\n~: nothing\n2.5: float\n",
    "- 1\n- [a, {b: c}]\n- |\n  block\n  text\n",
    "", "plain\n", "--- {a: 1}\n...\n",
]


@pytest.mark.parametrize("text", FEATURES)
def test_one_pass_reader_builds_what_the_full_loader_builds(text):
    fast, full = _both(text)
    assert fast is not yamlfile._FULL
    assert _shape(fast) == _shape(full)


def test_an_alias_stays_one_object():
    doc = read_yaml("a: &x {p: 1}\nb: *x\n")
    assert doc["a"] is doc["b"]


LEFT_TO_THE_FULL_LOADER = [
    "x: !!str 3\n", "x: !!binary aGk=\n", "!!set {a, b}\n", "a: &x 1\nb: &x 2\n",
    "a: *nope\n", "? [1]\n: 2\n", "<<: 1\n", "a: =\n", "--- 1\n--- 2\n",
    "k: &k key\n*k : v\n", "a: &x {b: *x}\n", "? 2001-12-14\n: day\n", "a: <<\n",
]


@pytest.mark.parametrize("text", LEFT_TO_THE_FULL_LOADER)
def test_text_the_one_pass_reader_leaves_reads_as_before(text):
    assert yamlfile._read_events(text, "t.yaml") is yamlfile._FULL
    try:
        expected = _shape(yamlfile._full_load(text, "t.yaml"))
    except (yaml.YAMLError, TopologyError) as exc:
        with pytest.raises(TopologyError, match=r"^t\.yaml"):
            read_yaml(text, file="t.yaml")
        assert isinstance(exc, yaml.YAMLError) or str(exc).startswith("t.yaml")
    else:
        assert _shape(read_yaml(text, file="t.yaml")) == expected


def test_a_list_holding_itself_is_left_to_the_full_loader_and_read():
    assert yamlfile._read_events("&a [*a]\n", "t.yaml") is yamlfile._FULL
    doc = read_yaml("&a [*a]\n")
    assert doc[0] is doc


def test_duplicate_key_names_both_lines():
    with pytest.raises(TopologyError, match=r"^t\.yaml:3: duplicate key 'a' \(first given "
                                            r"on line 1\)"):
        read_yaml("a: 1\nb: 2\na: 3\n", file="t.yaml")


def test_a_merged_key_may_be_written_again():
    doc = read_yaml("x: &x {a: 1}\ny: {<<: *x, a: 2}\n")
    assert doc["y"] == {"a": 2} and doc["y"].lines["a"] == 2


KEYS = st.one_of(st.text(max_size=8), st.integers(-5, 2**70), st.booleans(), st.none())
SCALARS = st.one_of(KEYS, st.floats(allow_nan=True), st.sampled_from(
    ["20us", "1Gbit/s", "n[1-4]", "yes", "0x10", "1e3", "2001-12-14", "<<", "=", "~", ""]))
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=25)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(DOCUMENTS, st.sampled_from([None, True, False]))
def test_random_documents_read_the_same_both_ways(document, flow):
    text = yaml.safe_dump(document, default_flow_style=flow)
    fast, full = _both(text)
    assert fast is not yamlfile._FULL
    assert _shape(fast) == _shape(full)
