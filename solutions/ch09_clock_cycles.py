"""Chapter 9, reference answer: torchgpipe's clock cycles (exercise in
``exercises/ch09_clock_cycles.py``; the simulator's is
:func:`simulator.pipeline.schedules.synchronous.clock_cycles`)."""

from __future__ import annotations


def clock_cycles(m: int, n: int) -> list[list[tuple[int, int]]]:
    """Tick ``k`` runs the pairs with ``i + j = k``: ``m + n − 1`` ticks."""
    ticks = []
    for k in range(m + n - 1):
        first, last = max(0, k - (m - 1)), min(k, n - 1)  # from i ≤ m − 1 and i ≥ 0
        ticks.append([(k - j, j) for j in range(first, last + 1)])
    return ticks
