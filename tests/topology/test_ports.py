"""Port ranges and outbound-only marks in the model: parsing, the rule per host, round trip."""

import pytest

from coc.errors import LaunchError, TopologyError
from coc.topology import from_dict, loads, to_dict
from coc.ports import environ_port_range, listen_socket, parse_port_range
from coc.topology.ports import host_port_range

TEXT = """\
networks:
  lan: {latency: 20us, bandwidth: 1Gbit/s, subnet: 10.0.0.0/24}
  wan: {latency: 1ms, bandwidth: 1Gbit/s, scope: public, port_range: 41000-41100}
sites:
  a:
    port_range: [41050, 42000]
    outbound_only: true
    hosts:
      - {name: n1, interfaces: [lan]}
      - {name: gw, role: gateway, interfaces: [lan, wan]}
  b:
    hosts:
      - {name: b-gw, role: gateway, outbound_only: true, interfaces: [wan]}
"""


@pytest.mark.parametrize("text", ["0-5", "70000", "1-70000", "a-b", "5-", True, [1, 2, 3]])
def test_bad_ranges_are_refused(text):
    with pytest.raises(TopologyError):
        parse_port_range(text)


def test_each_host_gets_what_all_its_ranges_allow():
    G = loads(TEXT)
    assert host_port_range(G, "n1") == (41050, 42000)          # the site's
    assert host_port_range(G, "gw") == (41050, 41100)          # site and WAN together
    assert host_port_range(G, "b-gw") == (41000, 41100)        # the WAN's
    assert G.graph["sites"]["a"]["outbound_only"] is True
    assert G.nodes["b-gw"]["outbound_only"] is True and G.nodes["gw"]["outbound_only"] is False


def test_round_trip_keeps_ranges_and_marks():
    G = loads(TEXT)
    again = from_dict(to_dict(G))
    assert again.nodes["wan"]["port_range"] == (41000, 41100)
    assert again.graph["sites"]["a"]["port_range"] == (41050, 42000)
    assert again.graph["sites"]["a"]["outbound_only"] is True
    assert again.nodes["b-gw"]["outbound_only"] is True


def test_environment_of_a_rank():
    assert environ_port_range({"COC_PORT_RANGE": "5000-5001"}) == (5000, 5001)
    with pytest.raises(TopologyError, match="COC_PORT_RANGE: "):
        environ_port_range({"COC_PORT_RANGE": "x"})


def test_listen_socket_binds_inside_and_names_an_exhausted_range():
    with listen_socket("127.0.0.1", (0, 0)) as first:
        port = first.getsockname()[1]
        with pytest.raises(LaunchError, match=f"no free port in the port range {port}-{port} "
                                              "on 127.0.0.1"):
            listen_socket("127.0.0.1", (port, port))
