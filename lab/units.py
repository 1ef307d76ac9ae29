"""Parsing what people type: sizes like ``64KiB``, ranges like ``64KiB:64MiB``, world lists.

Every parser raises :class:`UsageError` with one line in user terms; the CLI turns it into
``distml-lab: error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 2**10,
         "M": 2**20, "G": 2**30, "T": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9,
         "TB": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


class UsageError(ValueError):
    """Bad input from a user: the message is one line, fit to print as is."""


def parse_size(text: str) -> int:
    """``"64KiB"`` → 65536 bytes. Units: B, KiB, MiB, GiB, TiB (K, M, G, T too), KB, MB, GB,
    TB."""
    match = _SIZE.match(text)
    unit = match.group(2).upper() if match else ""
    if not match or unit not in UNITS:
        raise UsageError(f"invalid size {text!r}: expected a number with an optional unit "
                         "B, KiB, MiB, GiB, TiB, KB, MB, GB or TB (e.g. 64KiB)")
    value = float(match.group(1)) * UNITS[unit]
    if not math.isfinite(value) or value != int(value):
        raise UsageError(f"invalid size {text!r}: not a whole number of bytes")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """A comma list (``1KiB,1MiB``) or a range ``LO:HI`` in powers of two, or ``LO:HI:xF``.

    A range steps by a factor (default 2) from LO up to and including HI.
    """
    text = text.strip()
    if not text:
        raise UsageError("empty size list: give sizes like 64KiB:64MiB or 1KiB,1MiB")
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"invalid size range {text!r}: expected LO:HI or LO:HI:xFACTOR")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = 2
        if len(parts) == 3:
            m = re.fullmatch(r"x?(\d+)", parts[2].strip())
            if not m or int(m.group(1)) < 2:
                raise UsageError(f"invalid size range step {parts[2]!r}: expected x2, x4, …")
            factor = int(m.group(1))
        if lo > hi:
            raise UsageError(f"invalid size range {text!r}: {lo} B is above {hi} B")
        if lo == 0:
            raise UsageError(f"invalid size range {text!r}: a range must start above 0 B")
        sizes, size = [], lo
        while size <= hi:
            sizes.append(size)
            size *= factor
        return sizes
    return [parse_size(part) for part in text.split(",")]


def parse_worlds(text: str) -> list[int]:
    """``"2,4"`` → [2, 4]; each world size must be a whole number of at least 1."""
    worlds = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.lstrip("-").isdigit()):
            raise UsageError(f"invalid world size {part!r}: expected whole numbers like 2,4")
        if int(part) < 1:
            raise UsageError(f"invalid world size {int(part)}: a world needs at least 1 rank")
        worlds.append(int(part))
    return worlds


def format_size(nbytes: float) -> str:
    """65536 → ``"64KiB"`` (binary units, as few digits as needed)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:g}{unit}" if value == int(value) else f"{value:.3g}{unit}"
    return f"{int(nbytes)}B"


_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([kKmMbBtT]?)\s*$")
COUNT_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_count(text: str, what: str = "count", most: int | None = None) -> int:
    """``"7.5B"`` → 7_500_000_000; plain numbers (``1e9``) too. Suffixes K, M, B (billion), T.
    Above ``most`` (when given) is refused too."""
    match = _COUNT.match(text)
    if not match:
        raise UsageError(f"invalid {what} {text!r}: expected a whole number like 1500000, "
                         "1.5e6 or 1.5M (suffixes K, M, B, T)")
    value = float(match.group(1)) * COUNT_UNITS[match.group(2).upper()]
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise UsageError(f"invalid {what} {text!r}: not a whole number ≥ 0")
    if most is not None and value > most:
        raise UsageError(f"invalid {what} {text!r}: at most {most:.3g} is accepted")
    return int(value)


def whole(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``lo`` to ``hi``; anything else is a one-line
    usage error, ``invalid --flag VALUE: must be …`` (see :data:`OUT_OF_RANGE`)."""

    def parse(text: str) -> int:
        ascii_digits = re.fullmatch(r"\s*[+-]?[0-9]+\s*", text)  # int() takes ٣ and ³ too
        value = int(text) if ascii_digits else None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text}{OUT_OF_RANGE}a whole number from {lo} "
                                             f"to {hi}")
        return value

    parse.__name__ = "whole number"
    parse.bounds = (lo, hi)  # type: ignore[attr-defined]  # for the CLI's property test
    return parse


def number(lo: float, hi: float, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number from ``lo`` (excluded when ``lo_open``) to ``hi``;
    NaN, infinities and anything out of range are a one-line usage error."""

    def parse(text: str) -> float:
        try:
            value = float(text) if text.isascii() else math.nan
        except ValueError:
            value = math.nan
        low_ok = value > lo if lo_open else value >= lo
        if not (math.isfinite(value) and low_ok and value <= hi):
            side = ">" if lo_open else "≥"
            raise argparse.ArgumentTypeError(f"{text}{OUT_OF_RANGE}a number {side} {lo:g} and "
                                             f"≤ {hi:g}")
        return value

    parse.__name__ = "number"
    parse.bounds = (lo, hi, lo_open)  # type: ignore[attr-defined]
    return parse


OUT_OF_RANGE = ": must be "
"""What :func:`whole` and :func:`number` put between the value and the range they expect; the
CLI's parser turns ``argument --dp: 0: must be …`` into ``invalid --dp 0: must be …``."""


def usage_line(message: str) -> str:
    """argparse's error ``message`` in the lab's words: ``invalid --flag VALUE: must be …``
    for a value out of range, otherwise as argparse wrote it."""
    match = re.fullmatch(r"argument (?:\S+/)?(-\S+): (.*" + OUT_OF_RANGE + ".*)", message)
    return f"invalid {match.group(1)} {match.group(2)}" if match else message
