"""A job's marking of networks (coc/launcher/wire.py) and the record layer on the one-host
default (docs/topology.md "Encryption and compression", docs/launcher.md).

On the embedded default every site's processes share one machine and the gateways reach
each other through unix sockets; a marked WAN must still get its record layer there. The
jobs below show it from outside: the gateway daemons' counters of bytes that went through
records and those records' size on the wire (sealed records carry a 16-byte tag each:
more bytes than their plaintext; compressed ones far fewer), and their log naming the layer.
"""

import json
import warnings

import pytest
import yaml

from coc.errors import LaunchError, TopologyWarning
from coc.launcher import cli
from coc.launcher.plan import make_plan
from coc.launcher.wire import describe, override, parse_markings
from coc.topology import from_dict, load, to_dict
from hang_bounds import scaled
from launcher_helpers import program

MARKER = "coc-wan-marker-on-one-host"
SIZES = [100, 70_000, 1 << 20]


def _two_sites():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        return load("two-sites")


def _plan(**markings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        return make_plan(_two_sites(), ["true"], site_counts=[("a", 1), ("b", 1)],
                         markings=parse_markings(**markings))


def _gateway_wires(plan):
    return {g.site: plan.wire(g.endpoint) for g in plan.gateways}


def test_unnamed_values_mark_every_network_between_sites_and_only_those():
    plan = _plan(encrypt=["on"], compress=["lz4"])
    gws = {g.site: g.endpoint for g in plan.gateways}
    both = {"encrypt": True, "compress": "lz4"}
    assert _gateway_wires(plan) == {"a": {gws["b"]: both}, "b": {gws["a"]: both}}
    assert all(plan.wire(p.rank) == {} for p in plan.placements)     # the LANs stay raw
    assert plan.warnings == []
    assert plan.topology.nodes["a-lan"].get("encrypt") is False


def test_a_named_network_wins_over_the_unnamed_value_in_any_order():
    for encrypt in (["wan=off", "on"], ["on", "wan=off"]):
        plan = _plan(encrypt=encrypt, compress=["zstd"])
        assert {w["compress"] for wires in _gateway_wires(plan).values()
                for w in wires.values()} == {"zstd"}
        assert not any(w["encrypt"] for wires in _gateway_wires(plan).values()
                       for w in wires.values())
    # of two values for one network, the last
    assert parse_markings(compress=["wan=lz4", "wan=none"]) == {"wan": {"compress": "none"}}


def test_off_and_none_unmark_a_network_the_topology_marks():
    doc = to_dict(_two_sites())
    doc["networks"]["wan"].update(encrypt=True, compress="zstd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopologyWarning)
        G = from_dict(doc)
    marked, _ = override(G, {})
    assert describe(marked) == ["  wan: encrypted, compressed (zstd)"]
    cleared, _ = override(G, parse_markings(["off"], ["none"]))
    assert describe(cleared) == []
    assert G.nodes["wan"]["encrypt"] is True                     # the caller's is unchanged


def test_marking_a_network_inside_a_site_warns():
    plan = _plan(encrypt=["a-lan=on"])
    assert len(plan.warnings) == 1 and "'a-lan', which is inside site 'a'" in plan.warnings[0]
    assert all(w == {"encrypt": True, "compress": "none"} for p in plan.placements
               if p.site == "a" for w in plan.wire(p.rank).values())


@pytest.mark.parametrize("argv, words", [
    (["--encrypt", "maybe"], ["--encrypt maybe: 'maybe' is not one of on|off|true|false"]),
    (["--encrypt", "=on"], ["--encrypt =on: expected [NETWORK=]VALUE"]),
    (["--compress", "wan=gzip"], ["--compress wan=gzip: 'gzip' is not one of none|zstd|lz4"]),
    (["--compress", "moon=zstd"], ["unknown network 'moon'", "two-sites.yaml has: a-lan, "
                                   "b-lan, wan"]),
    (["--encrypt", "lan-a=on"], ["unknown network 'lan-a'"]),
])
def test_bad_markings_get_a_clear_message_and_exit_2(capsys, argv, words):
    status = cli.main([*argv, "--dry-run", "true"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("coc-run: error: ") and "Traceback" not in err
    for word in words:
        assert word in err


def test_parse_errors_are_launch_errors():
    with pytest.raises(LaunchError, match="--compress lz5"):
        parse_markings(compress=["lz5"])
    with pytest.raises(LaunchError, match="unknown network 'moon'"):
        override(_two_sites(), {"moon": {"encrypt": True}})


@pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")
def test_dry_run_shows_the_marked_networks(capsys):
    assert cli.main(["--encrypt", "on", "--compress", "wan=lz4", "--dry-run", "true"]) == 0
    out = capsys.readouterr().out
    assert "record layer (encrypt/compress) on hops over:\n  wan: encrypted, compressed " \
           "(lz4)\n" in out
    assert cli.main(["--dry-run", "true"]) == 0
    assert "record layer" not in capsys.readouterr().out


def _marker_job(coc_run, tmp_path, *options, topology=None):
    """Run the marker job (one rank per site) on the one-host default with ``options``;
    return the final stats and the log of gateway a-gw."""
    out = tmp_path / "out"
    args = ["--topology", topology] if topology else []
    result = coc_run(*args, *options, "--site", "a=1", "--site", "b=1", "--output-dir", out,
                     program("wire_marker.py"), MARKER, ",".join(map(str, SIZES)),
                     timeout=scaled(120))
    assert result.returncode == 0, result.stderr[-3000:]
    for r in range(2):
        assert json.loads((out / f"rank.{r}.stdout").read_text())["ok"] == len(SIZES)
    stats = json.loads((out / "gateway.a-gw.stdout").read_text().splitlines()[-1])["stats"]
    return stats, (out / "gateway.a-gw.stderr").read_text()


@pytest.mark.parametrize("options, layer", [
    (["--encrypt", "on"], "encrypted, uncompressed"),
    (["--encrypt", "wan=on", "--compress", "zstd"], "encrypted, zstd"),
    (["--compress", "wan=lz4"], "not encrypted, lz4"),
], ids=["encrypt", "encrypt-zstd", "lz4"])
def test_a_marked_wan_gets_the_record_layer_on_the_one_host_default(coc_run, tmp_path,
                                                                     options, layer):
    stats, log = _marker_job(coc_run, tmp_path, *options)
    payload = 2 * sum(SIZES)              # each size there and back through a-gw
    plain = stats["record_plain_sent"] + stats["record_plain_received"]
    wire = stats["record_wire_sent"] + stats["record_wire_received"]
    assert plain >= payload, stats
    line = next(line for line in log.splitlines() if "record layer" in line)
    assert f"record layer, {layer}" in line and "(unix:@" in line   # b-gw, over a unix socket
    if "--compress" in options:           # the marker text shrinks far
        assert wire < 0.25 * plain, stats
    else:                                 # sealed, not compressed: every record grew its tag
        assert wire > plain, stats


def test_a_topology_marking_is_followed_on_the_one_host_default_and_off_clears_it(coc_run,
                                                                                   tmp_path):
    doc = to_dict(_two_sites())
    doc["networks"]["wan"].update(encrypt=True, compress="zstd")
    topo = tmp_path / "two-sites-marked.yaml"
    topo.write_text(yaml.safe_dump(doc))
    stats, log = _marker_job(coc_run, tmp_path, topology=topo)
    assert "record layer, encrypted, zstd" in log
    assert stats["record_plain_sent"] >= sum(SIZES)
    stats, log = _marker_job(coc_run, tmp_path, "--encrypt", "off", "--compress", "none",
                             topology=topo)
    assert "record layer" not in log and stats["record_wire_sent"] == 0
