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


SEGMENTS = 4
"""Most segments the segmented ring cuts each chunk into (each step's messages in flight)."""

MIN_SEGMENT_BYTES = 1024 * 1024
"""Smallest segment the segmented ring cuts, bytes: below it a message's fixed cost (posting it,
and with more ranks than cores, the CPU the others wait for) outweighs what a segment gains
(four ranks on two cores, 4–8 MiB: 512 KiB segments 0.86–0.90 of gloo's throughput, 1 MiB
ones 0.94–0.96, the plain ring 0.93–1.00; ``benchmarks/collectives_vs_gloo.py``)."""


def segment_count(chunk_bytes: int, segments: int = SEGMENTS,
                  min_segment_bytes: int = MIN_SEGMENT_BYTES) -> int:
    """How many segments the segmented ring cuts a ``chunk_bytes``-byte chunk into: up to
    ``segments``, each at least ``min_segment_bytes`` (at least one: an empty or small chunk
    is one message, as in the plain ring)."""
    if segments < 1 or min_segment_bytes < 1:
        raise ValueError(f"need at least one segment of at least one byte, got "
                         f"{segments} segments of {min_segment_bytes} bytes")
    return max(1, min(segments, chunk_bytes // min_segment_bytes))
