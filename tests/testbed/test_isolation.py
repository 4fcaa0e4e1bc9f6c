"""On two-sites, hosts reach their own site and gateway but never the other site directly."""

import pytest
from hang_bounds import scaled

pytestmark = pytest.mark.root


@pytest.fixture
def two_sites(testbeds, topology):
    return testbeds(topology("two-sites"))


def test_hosts_reach_their_own_gateway(two_sites, serve, client):
    for host, gateway, lan in (("a1", "a-gw", "a-lan"), ("b1", "b-gw", "b-lan")):
        address = two_sites.address(gateway, lan)
        server = serve(two_sites, gateway, address, 7001)
        assert client(two_sites, host, address, 7001) == "ok"
        assert server.communicate(timeout=scaled(10))[0].strip() == "got 1"


def test_gateways_reach_each_other_over_the_wan(two_sites, serve, client):
    address = two_sites.address("b-gw", "wan")
    serve(two_sites, "b-gw", address, 7002)
    assert client(two_sites, "a-gw", address, 7002) == "ok"


def test_no_route_from_site_a_to_site_b(two_sites, serve, client):
    b1 = two_sites.address("b1")
    serve(two_sites, "b1", b1, 7003)
    outcome = client(two_sites, "a1", b1, 7003)
    assert outcome.startswith("OSError [Errno 101] Network is unreachable")
    # Neither does the gateway's WAN address help: a1 only has its own LAN.
    outcome = client(two_sites, "a1", two_sites.address("b-gw", "wan"), 7003)
    assert "Network is unreachable" in outcome


def test_gateways_do_not_forward_even_with_routes(two_sites, serve, client):
    """Routes through both gateways are not enough: no namespace forwards IP."""
    routes = {"a1": ("10.2.0.0/24", two_sites.address("a-gw", "a-lan")),
              "a-gw": ("10.2.0.0/24", two_sites.address("b-gw", "wan")),
              "b-gw": ("10.1.0.0/24", two_sites.address("a-gw", "wan")),
              "b1": ("10.1.0.0/24", two_sites.address("b-gw", "b-lan"))}
    for host, (subnet, via) in routes.items():
        two_sites.exec(host, ["ip", "route", "add", subnet, "via", via], check=True)
    b1 = two_sites.address("b1")
    serve(two_sites, "b1", b1, 7004)
    assert client(two_sites, "a1", b1, 7004) == "TimeoutError timed out"


def test_forwarding_is_off_and_no_default_route_anywhere(two_sites):
    for host in two_sites.hosts:
        done = two_sites.exec(host, ["cat", "/proc/sys/net/ipv4/ip_forward"],
                              capture_output=True, text=True, check=True)
        assert done.stdout.strip() == "0", host
        done = two_sites.exec(host, ["ip", "route", "show", "default"],
                              capture_output=True, text=True, check=True)
        assert done.stdout == "", host


def test_every_host_has_loopback_up(two_sites, serve, client):
    serve(two_sites, "a2", "127.0.0.1", 7005)
    assert client(two_sites, "a2", "127.0.0.1", 7005) == "ok"
