"""Chapter 8, reference answer: the pipeline bubble, both ways.

The exercise is in ``exercises/ch08_bubble.py``; the simulator's version, with interleaving, is
:func:`simulator.pipeline.schedules.bubble_fraction`.
"""

from __future__ import annotations


def bubble_fraction(stages: int, microbatches: int, relative_to: str = "total") -> float:
    """The bubble of a GPipe or 1F1B pipeline with equal stages (see the exercise)."""
    # The step takes m + p − 1 ticks (fill p − 1, then one tick per micro-batch); each stage
    # is busy m of them and idle p − 1.
    idle, busy = stages - 1, microbatches
    if relative_to == "total":
        return idle / (busy + idle)  # GPipe: (K − 1)/(M + K − 1)
    if relative_to == "ideal":
        return idle / busy  # Megatron: (p − 1)/m; b_total = b_ideal / (1 + b_ideal)
    raise ValueError(f"relative_to must be 'total' or 'ideal', got {relative_to!r}")
