"""Units in topology files: times, bandwidths and sizes parse and format back."""

import pytest

from coc.errors import TopologyError
from coc.topology.units import (format_bandwidth, format_size, format_time, parse_bandwidth,
                                parse_size, parse_time)


@pytest.mark.parametrize("text, seconds", [
    ("20us", 20e-6), ("20 us", 20e-6), ("20µs", 20e-6), ("1ms", 1e-3), ("1.8ms", 1.8e-3),
    ("500ns", 500e-9), ("2s", 2.0), (0, 0.0), ("0", 0.0), ("1e3us", 1e-3)])
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize("text, rate", [
    ("10Gbit/s", 1.25e9), ("100Mbit/s", 12.5e6), ("895Mbit/s", 111.875e6),
    ("200MB/s", 200e6), ("1 GiB/s", 2 ** 30), ("64kbit/s", 8000.0)])
def test_parse_bandwidth(text, rate):
    assert parse_bandwidth(text) == pytest.approx(rate, rel=1e-15)


@pytest.mark.parametrize("text, nbytes", [("4MiB", 4 << 20), ("1kB", 1000), (0, 0),
                                          ("65536", 65536), ("1.5KiB", 1536)])
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("parse, text, word", [
    (parse_time, "10 parsecs", "expected a time like 20us"),
    (parse_time, "10", "expected a time like 20us"),  # a forgotten unit is an error
    (parse_time, True, "expected a time"),
    (parse_time, "-1ms", "expected a time"),
    (parse_bandwidth, "10 Gbps", "expected a bandwidth like 10Gbit/s"),
    (parse_size, "4 MiBs", "expected a size like 4MiB")])
def test_bad_quantities_name_the_expected_form(parse, text, word):
    with pytest.raises(TopologyError, match=word):
        parse(text)


@pytest.mark.parametrize("value", [20e-6, 1.8e-3, 3.3333e-7, 2.0])
def test_time_round_trips_at_15_digits(value):
    assert parse_time(format_time(value, 15)) == pytest.approx(value, rel=1e-14)


def test_format_picks_readable_units():
    assert format_time(0.0215) == "21.5ms"
    assert format_bandwidth(parse_bandwidth("895Mbit/s")) == "895Mbit/s"
    assert format_size(4 << 20) == "4MiB"
