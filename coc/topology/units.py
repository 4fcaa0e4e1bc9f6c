"""Parse and format the times, bandwidths and sizes written in topology files."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from coc.errors import TopologyError
from coc.topology.limits import excerpt

__all__ = ["parse_time", "parse_bandwidth", "parse_size",
           "format_time", "format_bandwidth", "format_size"]

# unit -> (power of ten, then factor) to seconds, bytes per second, bytes; the power of ten
# is applied in the decimal text so that '20us' is exactly the float 2e-05
_TIME = {"ns": (-9, 1), "us": (-6, 1), "µs": (-6, 1), "ms": (-3, 1), "s": (0, 1)}
_SIZE = {"B": (0, 1), "kB": (3, 1), "KB": (3, 1), "MB": (6, 1), "GB": (9, 1), "TB": (12, 1),
         "KiB": (0, 2 ** 10), "MiB": (0, 2 ** 20), "GiB": (0, 2 ** 30), "TiB": (0, 2 ** 40)}
_BANDWIDTH = {"bit/s": (0, 1 / 8), "kbit/s": (3, 1 / 8), "Kbit/s": (3, 1 / 8),
              "Mbit/s": (6, 1 / 8), "Gbit/s": (9, 1 / 8), "Tbit/s": (12, 1 / 8),
              **{f"{unit}/s": factor for unit, factor in _SIZE.items()}}

_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([^\s0-9].*?)?\s*$")


def _parse(text: object, units: Mapping[str, tuple[int, float]], what: str,
           example: str) -> float:
    """Return ``text`` (a number with a unit from ``units``) in base units."""
    match = None if isinstance(text, bool) else _QUANTITY.match(str(text))
    if match is not None and match.group(2) is None and float(match.group(1)) == 0:
        return 0.0
    if match is None or match.group(2) not in units:
        raise TopologyError(f"{excerpt(text)} is not a {what}: expected a {what} like {example} "
                            f"(units: {', '.join(units)})")
    power, factor = units[match.group(2)]
    number = match.group(1)
    if "e" in number.lower():
        value = float(number) * 10.0 ** power * factor
    else:
        value = float(f"{number}e{power}") * factor
    if not math.isfinite(value):
        raise TopologyError(f"{excerpt(text)} is not a finite {what}")
    return value


def parse_time(text: str | float) -> float:
    """Return the seconds that a time such as ``'20us'`` stands for.

    Parameters
    ----------
    text : str or number
        A number and one of the units ``ns``, ``us`` (or ``µs``), ``ms``, ``s``.
        A bare ``0`` is accepted; other bare numbers are not, because a forgotten unit
        is a mistake a factor of a million wide.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    TopologyError
        If ``text`` is not a time: a number followed by a time unit.

    Examples
    --------
    >>> parse_time("20us")
    2e-05
    >>> parse_time("1.5 ms")
    0.0015
    >>> parse_time("10 parsecs")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: '10 parsecs' is not a time: expected a time like 20us (units: ns, us, µs, ms, s)
    """
    return _parse(text, _TIME, "time", "20us")


# The docstring has parse_time's sections (numpydoc) on purpose: each stands alone in help().
def parse_bandwidth(text: str | float) -> float:
    """Return the bytes per second that a bandwidth such as ``'10Gbit/s'`` stands for.

    Parameters
    ----------
    text : str or number
        A number and a unit: ``bit/s``, ``kbit/s``, ``Mbit/s``, ``Gbit/s``, ``Tbit/s`` (bits,
        powers of 1000), ``B/s``, ``kB/s``, ``MB/s``, ``GB/s`` (bytes, powers of 1000) or
        ``KiB/s``, ``MiB/s``, ``GiB/s`` (bytes, powers of 1024).

    Returns
    -------
    float
        Bytes per second.

    Raises
    ------
    TopologyError
        If ``text`` is not a bandwidth: a number followed by a bandwidth unit.

    Examples
    --------
    >>> parse_bandwidth("10Gbit/s")
    1250000000.0
    >>> parse_bandwidth("200 MB/s")
    200000000.0
    >>> parse_bandwidth("1 MiB/s")
    1048576.0
    """
    return _parse(text, _BANDWIDTH, "bandwidth", "10Gbit/s")


def parse_size(text: str | int) -> int:
    """Return the bytes that a size such as ``'4MiB'`` stands for.

    Parameters
    ----------
    text : str or int
        A whole number of bytes, or a number and a unit: ``B``, ``kB``, ``MB``, ``GB``
        (powers of 1000), ``KiB``, ``MiB``, ``GiB`` (powers of 1024).

    Returns
    -------
    int
        Bytes.

    Raises
    ------
    TopologyError
        If ``text`` is not a size.

    Examples
    --------
    >>> parse_size("4MiB")
    4194304
    >>> parse_size("1.5 kB")
    1500
    >>> parse_size(65536)
    65536
    """
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    if isinstance(text, str) and text.strip().isdigit():
        return int(text)
    return int(round(_parse(text, _SIZE, "size", "4MiB")))


def _format(value: float, units: Sequence[tuple[str, float]], digits: int) -> str:
    """Write ``value`` with the largest unit of ``units`` (ascending) it reaches."""
    unit, factor = units[0]
    for candidate, candidate_factor in units:
        if abs(value) >= candidate_factor * (1 - 1e-12):
            unit, factor = candidate, candidate_factor
    return f"{value / factor:.{digits}g}{unit}"


def format_time(seconds: float, digits: int = 6) -> str:
    """Write ``seconds`` in the largest time unit that keeps the number at least 1.

    ``digits`` is the number of significant digits (15 round-trips through :func:`parse_time`).

    Examples
    --------
    >>> format_time(2e-05)
    '20us'
    >>> format_time(0.0215)
    '21.5ms'
    >>> format_time(0)
    '0s'
    """
    if seconds == 0:
        return "0s"
    return _format(seconds, [("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)], digits)


def format_bandwidth(bytes_per_second: float, digits: int = 6) -> str:
    """Write a bandwidth in bits per second with the largest fitting unit (``digits`` significant).

    Examples
    --------
    >>> format_bandwidth(1.25e9)
    '10Gbit/s'
    >>> format_bandwidth(parse_bandwidth("200MB/s"))
    '1.6Gbit/s'
    """
    return _format(bytes_per_second * 8, [("bit/s", 1), ("kbit/s", 1e3), ("Mbit/s", 1e6),
                                          ("Gbit/s", 1e9), ("Tbit/s", 1e12)], digits)


def format_size(nbytes: float, digits: int = 6) -> str:
    """Write a size in bytes with the largest binary unit it fills (``digits`` significant).

    Examples
    --------
    >>> format_size(4194304)
    '4MiB'
    >>> format_size(1000)
    '1000B'
    """
    return _format(nbytes, [("B", 1), ("KiB", 2 ** 10), ("MiB", 2 ** 20), ("GiB", 2 ** 30)],
                   digits)
