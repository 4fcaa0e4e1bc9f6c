"""Slurm-style host lists: expansion, compression and their errors."""

import pytest
from hypothesis import given, strategies as st

from coc.topology.hostlist import HostlistError, compress, expand, natural_key


@pytest.mark.parametrize("expression, names", [
    ("n1", ["n1"]),
    ("node[01-03,10]", ["node01", "node02", "node03", "node10"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("a[1-2],gw", ["a1", "a2", "gw"]),
    ("p[098-101]", ["p098", "p099", "p100", "p101"]),
])
def test_expand(expression, names):
    assert expand(expression) == names


@pytest.mark.parametrize("expression, fault", [
    ("node[01-16", "'[' without ']'"), ("node01-16]", "']' without '['"),
    ("n[a-b]", "bad range 'a-b'"), ("n[3-1]", "runs backwards"), ("n[1-2],n2", "listed twice"),
    ("", "expected a name"), ("n[[1]]", "nested"), ("a,,b", "empty name")])
def test_expand_errors(expression, fault):
    with pytest.raises(HostlistError, match=fault.replace("[", r"\[").replace("]", r"\]")):
        expand(expression)


def test_compress_merges_ranges_and_keeps_padding():
    assert compress(["a4", "a1", "a2", "a3", "a-gw"]) == "a-gw,a[1-4]"
    assert compress(expand("p[001-024,030]")) == "p[001-024,030]"
    assert compress(["x"]) == "x"


names = st.lists(st.builds(lambda prefix, n, pad: f"{prefix}{str(n).zfill(pad)}",
                           st.sampled_from(["n", "rack-", "gw"]), st.integers(0, 120),
                           st.integers(0, 3)) | st.sampled_from(["login", "a-gw"]),
                 min_size=1, max_size=30, unique=True)


@given(names)
def test_compress_is_the_inverse_of_expand(hosts):
    assert sorted(expand(compress(hosts))) == sorted(hosts)


def test_natural_order():
    assert sorted(["n10", "n9", "n1"], key=natural_key) == ["n1", "n9", "n10"]
