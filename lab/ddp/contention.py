"""Compute and communication on shared cores: how much each slows the other, measured.

:func:`~backends.ddp_measure.overlap_interference` is a primitive run on every rank at once —
matmuls on the main thread while gloo's threads exchange messages with a partner rank (its rank
code lives in :mod:`backends.ddp_measure`) — and :func:`interference` launches it and turns it
into a :class:`simulator.ddp.Interference` for the prediction (:class:`simulator.ddp.CoreShare`).

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics

from backends.ddp_measure import COMM_SEGMENT_BYTES, overlap_interference
from simulator.ddp import Interference

__all__ = ["COMM_SEGMENT_BYTES", "interference", "overlap_interference"]


def interference(world: int) -> Interference:
    """:func:`overlap_interference` on ``world`` ranks at once, medians over the ranks."""
    from backends.launch import spawn

    rates = spawn(overlap_interference, world)
    return Interference(statistics.median(r[0] for r in rates),
                        statistics.median(r[1] for r in rates))
