"""Parsing what people type: sizes like ``64KiB``, ranges like ``64KiB:64MiB``, world lists.

Every parser raises :class:`UsageError` with one line in user terms; the CLI turns it into
``distml-lab: error: ...`` and exit status 2.
"""

from __future__ import annotations

import re

UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "K": 2**10, "M": 2**20,
         "G": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


class UsageError(ValueError):
    """Bad input from a user: the message is one line, fit to print as is."""


def parse_size(text: str) -> int:
    """``"64KiB"`` → 65536 bytes. Units: B, KiB, MiB, GiB (K, M, G too), KB, MB, GB."""
    match = _SIZE.match(text)
    unit = match.group(2).upper() if match else ""
    if not match or unit not in UNITS:
        raise UsageError(f"invalid size {text!r}: expected a number with an optional unit "
                         "B, KiB, MiB, GiB, KB, MB or GB (e.g. 64KiB)")
    value = float(match.group(1)) * UNITS[unit]
    if value != int(value):
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
        if not part.lstrip("-").isdigit():
            raise UsageError(f"invalid world size {part!r}: expected whole numbers like 2,4")
        if int(part) < 1:
            raise UsageError(f"invalid world size {int(part)}: a world needs at least 1 rank")
        worlds.append(int(part))
    return worlds


def format_size(nbytes: float) -> str:
    """65536 → ``"64KiB"`` (binary units, as few digits as needed)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:g}{unit}" if value == int(value) else f"{value:.3g}{unit}"
    return f"{int(nbytes)}B"


_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([kKmMbBtT]?)\s*$")
COUNT_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_count(text: str, what: str = "count") -> int:
    """``"7.5B"`` → 7_500_000_000; plain numbers (``1e9``) too. Suffixes K, M, B (billion), T."""
    match = _COUNT.match(text)
    if not match:
        raise UsageError(f"invalid {what} {text!r}: expected a whole number like 1500000, "
                         "1.5e6 or 1.5M (suffixes K, M, B, T)")
    value = float(match.group(1)) * COUNT_UNITS[match.group(2).upper()]
    if value != int(value) or value < 0:
        raise UsageError(f"invalid {what} {text!r}: not a whole number ≥ 0")
    return int(value)
