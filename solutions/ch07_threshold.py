"""Chapter 7, reference answer: the effective fusion threshold (exercise in
``exercises/ch07_threshold.py``; the simulator's is
:func:`simulator.horovod.fusion.effective_threshold`)."""

from __future__ import annotations


def effective_threshold(threshold_bytes: int, local_size: int) -> int:
    """Round up to a multiple of ``local_size × 8 × 64`` bytes by ceiling division."""
    unit = max(local_size, 1) * 8 * 64
    return (threshold_bytes + unit - 1) // unit * unit
