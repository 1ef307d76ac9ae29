"""Chapter 14, reference answer: ZeRO's communication volume (exercise in
``exercises/ch14_zero_traffic.py``; the simulator's is
:func:`simulator.zero.communication_bytes`)."""

from __future__ import annotations


def communication_bytes(params: int, stage: int, dp: int, precision: str = "mixed") -> float:
    """``(N_d − 1)/N_d`` of the buffer per ring half: 2 halves for stages 0–2, 3 for stage 3."""
    itemsize = 2 if precision == "mixed" else 4
    half = (dp - 1) / dp * params * itemsize  # one reduce-scatter or all-gather
    halves = 3 if stage == 3 else 2
    return halves * half
