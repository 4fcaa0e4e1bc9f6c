"""Testbeds come down completely, coexist, replace stale copies of themselves, and need root."""

import os
import subprocess
import sys
import time
import pytest

import coc.testbed
from coc.testbed import names, netns, state
from hang_bounds import scaled

pytestmark = pytest.mark.root


@pytest.fixture
def two_sites(topology):
    return topology("two-sites")


def _root_view():
    """What the root namespace shows: named namespaces, links (with bridges) and routes."""
    def out(*argv):
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    links = sorted(line.split(":")[1].strip() for line in out("ip", "-o", "link").splitlines())
    return {"netns": sorted(netns.namespaces()), "links": links,
            "bridges": out("ip", "-o", "link", "show", "type", "bridge"),
            "routes": out("ip", "route"),
            "state": sorted(state.STATE_DIR.iterdir()) if state.STATE_DIR.is_dir() else []}


def test_down_leaves_nothing_behind(testbeds, two_sites):
    before = _root_view()
    bed = testbeds(two_sites)
    during = _root_view()
    assert len(during["netns"]) == len(before["netns"]) + 11  # 10 hosts + the bridges' own
    assert during["links"] == before["links"]  # nothing is ever made in the root namespace
    removed = bed.down()
    assert removed["namespaces"] == 11
    assert _root_view() == before
    assert bed.down()["namespaces"] == 0  # idempotent


def test_down_ends_processes_left_in_the_testbed(testbeds, two_sites):
    bed = testbeds(two_sites)
    sleeper = bed.popen("a1", ["sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while sleeper.pid not in netns.pids([bed.namespace("a1")]):  # ip netns exec started
            assert time.monotonic() < deadline and sleeper.poll() is None
            time.sleep(0.01)
        assert bed.down()["processes"] == 1
        assert sleeper.wait(timeout=scaled(5)) == -15
    finally:
        sleeper.kill()
        sleeper.wait(timeout=scaled(5))


def test_two_testbeds_at_once(testbeds, two_sites, serve, client):
    one, two = testbeds(two_sites), testbeds(two_sites)
    assert one.namespace("a1") != two.namespace("a1")
    a2 = one.address("a2")
    assert a2 == two.address("a2")  # same addresses, separate networks
    serve(one, "a2", a2, 7201)
    assert client(one, "a1", a2, 7201) == "ok"
    assert client(two, "a1", a2, 7201).startswith("ConnectionRefusedError")
    two.down()
    assert not one.missing()
    assert client(one, "a3", a2, 7201) == "ConnectionRefusedError [Errno 111] Connection refused"


def test_up_over_a_stale_testbed_cleans_first(testbeds, two_sites):
    first = testbeds(two_sites)
    name = first.name
    # A crash mid-way: a namespace under the testbed's prefix that no state file records.
    netns.add_namespaces([names.host_namespace(name, "left-over")])
    again = testbeds(two_sites, name=name)
    assert again.state["stale_removed"]["namespaces"] == 12
    assert not again.missing()
    assert names.host_namespace(name, "left-over") not in netns.namespaces()


def test_down_without_state_still_finds_the_namespaces(testbeds, two_sites):
    bed = testbeds(two_sites)
    state.remove(bed.name)  # the state file lost, e.g. /run wiped by hand
    assert coc.testbed.down(bed.name)["namespaces"] == 11
    assert not names.owned(bed.name, netns.namespaces())


def test_status_reports_what_is_and_is_not_emulated(testbeds, two_sites):
    bed = testbeds(two_sites)
    done = subprocess.run([sys.executable, "-m", "coc.cli", "testbed", "status", "--name",
                           bed.name], capture_output=True, text=True, timeout=scaled(30))
    assert done.returncode == 0, done.stderr
    assert "bandwidth: emulated" in done.stdout
    latency = "latency: emulated" if bed.offered["netem"] else "latency: NOT EMULATED"
    assert latency in done.stdout and "set_peer_delay" in done.stdout
    assert "a-gw  a     gateway  eth0 10.1.0.5/24 (a-lan), eth1 198.51.100.1/24 (wan)" \
        in done.stdout


def test_cli_up_exec_down():
    name = f"pt{os.getpid()}-cli"

    def coc(*args):
        return subprocess.run([sys.executable, "-m", "coc.cli", "testbed", *args],
                              capture_output=True, text=True, timeout=scaled(60))

    try:
        up = coc("up", "private-pair", "--name", name)
        assert up.returncode == 0, up.stderr
        assert f"testbed {name} up in" in up.stdout
        # the topology's warnings once each, one line, not Python's warning machinery
        assert up.stdout.count("topology warning: site cluster1 and site cluster2 are joined "
                               "only through gateway 'fe1'") == 1, up.stdout
        assert "TopologyWarning" not in up.stderr, up.stderr
        done = coc("exec", "--name", name, "fe1", "--", "ip", "-o", "-4", "addr", "show", "eth1")
        assert done.returncode == 0 and "203.0.113.1/24" in done.stdout
        assert coc("exec", "--name", name, "c1n1", "--", "false").returncode == 1
        wrong = coc("exec", "--name", name, "a1", "--", "true")
        assert wrong.returncode == 2
        assert f"coc testbed: error: testbed '{name}' has no host 'a1'" in wrong.stderr
        down = coc("down", "--name", name)
        assert down.returncode == 0 and "removed 11 namespaces" in down.stdout
    finally:
        coc("down", "--name", name)


def test_not_root_gets_a_clear_error():
    """Parse ``coc testbed up two-sites`` as root, drop to nobody, then run it."""
    nobody = 65534
    drop = ("import os, sys, coc.cli\n"
            "args = coc.cli.build_parser().parse_args(['testbed', 'up', 'two-sites'])\n"
            f"os.setgroups([]); os.setresgid(*[{nobody}] * 3); os.setresuid(*[{nobody}] * 3)\n"
            "try:\n    args.func(args)\n"
            "except coc.errors.CocError as exc:\n    sys.exit(f'error: {exc}')\n")
    done = subprocess.run([sys.executable, "-c", drop], capture_output=True, text=True,
                          timeout=scaled(30))
    assert done.returncode == 1, done.stderr
    assert "needs root" in done.stderr and f"uid {nobody}" in done.stderr
