"""Levels and colors (wan, site, network, host) as in MPICH-G2."""

import warnings

from coc.topology import LEVELS, from_dict, load
from coc.topology.levels import levels


def test_two_sites_colors(good):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        colors = levels(load(good("two-sites-small")))
    assert LEVELS == ("wan", "site", "network", "host")
    assert list(colors) == ["a1", "a2", "a-gw", "b1", "b2", "b-gw"]
    assert [c["host"] for c in colors.values()] == [0, 1, 2, 3, 4, 5]
    assert {c["wan"] for c in colors.values()} == {0}
    assert [c["site"] for c in colors.values()] == [0, 0, 0, 1, 1, 1]
    assert [c["network"] for c in colors.values()] == [0, 0, 0, 1, 1, 1]


def test_network_color_splits_a_site_by_direct_reach_and_joins_through_links():
    G = from_dict({
        "networks": {"ib": {"latency": "2us", "bandwidth": "56Gbit/s"},
                     "eth": {"latency": "20us", "bandwidth": "1Gbit/s"},
                     "sw1": {"latency": "20us", "bandwidth": "1Gbit/s"},
                     "sw2": {"latency": "20us", "bandwidth": "1Gbit/s"}},
        "sites": {"s": {"hosts": [{"name": "i[1-2]", "interfaces": ["ib"]},
                                  {"name": "gw", "role": "gateway", "interfaces": ["ib", "eth"]},
                                  {"name": "e1", "interfaces": ["eth"]}]},
                  "t": {"hosts": [{"name": "x1", "role": "gateway",
                                   "interfaces": ["sw1", "eth"]},
                                  {"name": "x2", "interfaces": ["sw2"]}]}},
        "links": [{"between": ["sw1", "sw2"], "latency": "1us", "bandwidth": "10Gbit/s"}],
    })
    colors = levels(G)
    network = {h: c["network"] for h, c in colors.items()}
    # gw forwards between ib and eth but does not make them one: it takes ib, where most
    # of site s is; x1 and x2 of site t talk directly through the linked switches
    assert network == {"e1": 0, "gw": 1, "i1": 1, "i2": 1, "x1": 2, "x2": 2}
    assert {h: c["site"] for h, c in colors.items()} == {"e1": 0, "gw": 0, "i1": 0, "i2": 0,
                                                         "x1": 1, "x2": 1}


def test_network_color_separates_unjoined_networks_of_one_site():
    G = from_dict({
        "networks": {"lan1": {"latency": "2us", "bandwidth": "1Gbit/s"},
                     "lan2": {"latency": "2us", "bandwidth": "1Gbit/s"}},
        "sites": {"s": {"hosts": [{"name": "a[1-2]", "interfaces": ["lan1"]},
                                  {"name": "b[1-2]", "interfaces": ["lan2"]},
                                  {"name": "g", "role": "gateway", "dedicated": True,
                                   "interfaces": ["lan1", "lan2"]}]}}})
    # g forwards between the two LANs, but a and b hosts cannot talk directly
    colors = levels(G)
    assert {h: c["network"] for h, c in colors.items()} == {"a1": 0, "a2": 0, "b1": 1,
                                                            "b2": 1, "g": 0}
