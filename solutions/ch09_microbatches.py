"""Chapter 9, reference answer: the micro-batches of ``Tensor.chunk`` (exercise in
``exercises/ch09_microbatches.py``)."""

from __future__ import annotations


def microbatch_sizes(batch: int, chunks: int) -> list[int]:
    """Pieces of ``⌈batch/chunks⌉`` samples and a smaller last one: ``⌈batch/size⌉`` pieces."""
    size = -(-batch // chunks)
    pieces = -(-batch // size)
    return [min(size, batch - i * size) for i in range(pieces)]
