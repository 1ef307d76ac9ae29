"""Chapter 23, reference answer: peak in-flight activations per rank.

The exercise is in ``exercises/ch23_in_flight.py``; the simulator counts the same with
:func:`simulator.pipeline.schedules.split_backward.in_flight_split`.
"""

from __future__ import annotations

from collections.abc import Sequence


def in_flight(actions: Sequence[tuple[str, int, int]]) -> int:
    """``F`` allocates, ``W`` or ``B`` frees, ``I`` keeps (``W`` still needs the inputs)."""
    live: set[tuple[int, int]] = set()
    most = 0
    for kind, microbatch, chunk in actions:
        if kind == "F":
            live.add((microbatch, chunk))
            most = max(most, len(live))
        elif kind in ("W", "B"):
            live.discard((microbatch, chunk))
    return most


def peak_in_flight(schedule: str, stages: int, microbatches: int, rank: int) -> int:
    """1F1B: ``min(p − r, m)``; ZB-H1: ``r`` more, ``min(p, m)``; ZB-V: ``2p`` chunks."""
    if schedule == "1f1b":
        return min(stages - rank, microbatches)
    if schedule == "zb_h1":
        return min(stages, microbatches)
    if schedule == "zbv":
        return 2 * stages
    raise ValueError(f"unknown schedule {schedule!r}")
