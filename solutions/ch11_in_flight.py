"""Chapter 11, reference answer: the peak stash of a schedule (exercise in
``exercises/ch11_in_flight.py``; the simulator's is
:func:`simulator.pipeline.schedules.critical_path.in_flight`)."""

from __future__ import annotations

from collections.abc import Sequence


def peak_stash(actions: Sequence[tuple[str, int, int]]) -> int:
    """A set of stashed ``(micro-batch, chunk)`` keys; the peak follows each forward."""
    stashed: set[tuple[int, int]] = set()
    peak = 0
    for kind, microbatch, chunk in actions:
        if kind == "F":
            stashed.add((microbatch, chunk))
            peak = max(peak, len(stashed))
        else:
            stashed.discard((microbatch, chunk))
    return peak
