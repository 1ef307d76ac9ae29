"""How a buffer is cut into per-rank chunks — one rule shared by both twins.

Ring and halving/doubling algorithms cut a buffer of ``count`` elements into ``parts``
contiguous chunks. When ``parts`` does not divide ``count``, the first ``count % parts`` chunks
get one element more (MPICH and Gloo do the same), so chunk sizes differ by at most one element
and empty chunks appear only when ``count < parts``. The real twins (``backends.collectives``)
import this module, so the two twins always cut a buffer the same way.
"""

from __future__ import annotations


def chunk_sizes(count: int, parts: int) -> list[int]:
    """Element counts of ``parts`` chunks of a ``count``-element buffer (sum = ``count``)."""
    if parts < 1:
        raise ValueError(f"cannot cut a buffer into {parts} parts")
    if count < 0:
        raise ValueError(f"a buffer cannot have {count} elements")
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def chunk_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """``(start, stop)`` element offsets of each chunk of :func:`chunk_sizes`."""
    bounds, start = [], 0
    for size in chunk_sizes(count, parts):
        bounds.append((start, start + size))
        start += size
    return bounds
