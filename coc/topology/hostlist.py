"""Expand and compress Slurm-style host lists such as ``node[01-16,20]``."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
import itertools
import math
import re

from coc.errors import HostlistError
from coc.topology.limits import exceeded, excerpt, limits

__all__ = ["HostlistError", "expand", "compress", "natural_key"]


_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=1 << 16)
def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Return a sort key that orders ``n2`` before ``n10``.

    Examples
    --------
    >>> sorted(["n10", "n2", "gw"], key=natural_key)
    ['gw', 'n2', 'n10']
    """
    return tuple((0, int(part), part) if part.isdigit() else (1, 0, part)
                 for part in _DIGITS.split(name) if part) or ((1, 0, ""),)


def _split_top(expression: str) -> list[str]:
    """Split ``expression`` at the commas that are outside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(expression):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"host list {excerpt(expression)}: nested '['")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"host list {excerpt(expression)}: ']' without '['")
        elif char == "," and depth == 0:
            parts.append(expression[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"host list {excerpt(expression)}: '[' without ']'")
    parts.append(expression[start:])
    return parts


def _spans(expression: str, spec: str) -> list[tuple[int, int, int]]:
    """Return the (first, last, zero-padded width) spans of one bracket ``spec`` (``01-16,20``)."""
    spans = []
    for item in spec.split(","):
        low, dash, high = item.strip().partition("-")
        if (not low.isdigit() or (dash and not high.isdigit())
                or max(len(low), len(high)) > 18):
            raise HostlistError(f"host list {excerpt(expression)}: bad range {excerpt(item)} "
                                f"in [{excerpt(spec)[1:-1]}]: expected numbers like [1-4,7] or "
                                f"[01-16] (up to 18 digits)")
        high = high if dash else low
        if int(high) < int(low):
            raise HostlistError(f"host list {excerpt(expression)}: range {excerpt(item)} runs "
                                f"backwards")
        spans.append((int(low), int(high), len(low) if low.startswith("0") and len(low) > 1
                      else 0))
    return spans


def _names(spans: Iterable[tuple[int, int, int]]) -> Iterator[str]:
    """Yield the numbers of ``spans`` as text, in order."""
    for low, high, width in spans:
        for n in range(low, high + 1):
            yield str(n).zfill(width)


def expand(expression: str) -> list[str]:
    """Return the host names a host list expression stands for, in the order written.

    Parameters
    ----------
    expression : str
        Names separated by commas; each may hold bracketed ranges ``[1-4,7]`` (zero padding
        of the first number is kept: ``[01-16]``). Several brackets give every combination:
        ``rack[1-2]-n[1-3]``.

    Returns
    -------
    list of str

    Raises
    ------
    HostlistError
        On unbalanced brackets, a range that is not numeric or runs backwards, an empty name,
        a name listed twice, or more names than the limit ``host_range``
        (:mod:`coc.topology.limits`), which is checked before any name is made.

    Examples
    --------
    >>> expand("node[01-03,10]")
    ['node01', 'node02', 'node03', 'node10']
    >>> expand("rack[1-2]-n[1-2],gw")
    ['rack1-n1', 'rack1-n2', 'rack2-n1', 'rack2-n2', 'gw']
    >>> expand("n[3-1]")
    Traceback (most recent call last):
    ...
    coc.errors.HostlistError: host list 'n[3-1]': range '3-1' runs backwards
    """
    if not isinstance(expression, str) or not expression.strip():
        raise HostlistError(f"host list {excerpt(expression)}: expected a name like node[01-16,20]")
    parts, count = [], 0
    for part in _split_top(expression):
        part = part.strip()
        pieces = re.split(r"\[([^\]]*)\]", part)
        if not part or any(c in part for c in " \t"):
            raise HostlistError(f"host list {excerpt(expression)}: empty name or blank "
                                f"inside a name")
        ranges = [None if i % 2 == 0 else _spans(expression, piece)
                  for i, piece in enumerate(pieces)]
        count += math.prod(sum(high - low + 1 for low, high, _ in spans)
                           for spans in ranges if spans is not None)
        if count > limits().host_range:
            raise HostlistError(exceeded(f"host list {excerpt(expression)} stands for",
                                         "host_range", count))
        parts.append([[piece] if spans is None else _names(spans)
                      for piece, spans in zip(pieces, ranges)])
    names: list[str] = []
    for choices in parts:
        names.extend("".join(combo) for combo in itertools.product(*choices))
    seen = set()
    for name in names:
        if name in seen:
            raise HostlistError(f"host list {excerpt(expression)}: name {excerpt(name)} "
                                f"listed twice")
        seen.add(name)
    return names


def _runs(numbers: Iterable[int]) -> list[list[int]]:
    """Group sorted integers into (first, last) runs of consecutive values."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return runs


def compress(names: Iterable[str]) -> str:
    """Return a short host list expression for ``names`` (the inverse of :func:`expand`).

    Names that differ only in their last number are merged into one bracketed range;
    zero-padded numbers keep their width. The result lists groups in natural order.

    Parameters
    ----------
    names : iterable of str

    Returns
    -------
    str

    Examples
    --------
    >>> compress(["a1", "a2", "a3", "a4", "a-gw"])
    'a-gw,a[1-4]'
    >>> compress(["node01", "node02", "node03", "node10", "node11"])
    'node[01-03,10-11]'
    >>> sorted(expand(compress(["n9", "n10", "n12"])), key=natural_key)
    ['n9', 'n10', 'n12']
    """
    groups: dict[tuple[str, str | None, str], list[str]] = {}
    for name in set(names):
        match = re.match(r"^(.*?)(\d+)(\D*)$", name)
        if match is None:
            groups.setdefault((name, None, ""), [])
            continue
        prefix, digits, suffix = match.groups()
        groups.setdefault((prefix, "digits", suffix), []).append(digits)
    parts = []
    for (prefix, kind, suffix), numbers in groups.items():
        if kind is None:
            parts.append(prefix)
            continue
        width = max((len(d) for d in numbers if d.startswith("0") and len(d) > 1), default=0)
        by_width: dict[int, list[int]] = {width: [], 0: []}
        for digits in numbers:
            if width and len(digits) == width:
                by_width[width].append(int(digits))
            elif str(int(digits)) == digits:
                by_width[0].append(int(digits))
            else:  # padded to another width than the group's: keep it as written
                parts.append(f"{prefix}{digits}{suffix}")
        for group_width, members in by_width.items():
            if len(members) == 1:
                parts.append(f"{prefix}{str(members[0]).zfill(group_width)}{suffix}")
            elif members:
                spec = ",".join(
                    str(lo).zfill(group_width) if lo == hi
                    else f"{str(lo).zfill(group_width)}-{str(hi).zfill(group_width)}"
                    for lo, hi in _runs(sorted(members)))
                parts.append(f"{prefix}[{spec}]{suffix}")
    return ",".join(sorted(parts, key=natural_key))
