"""Chapter 10, reference answer: PipeDream's stage time (exercise in
``exercises/ch10_stage_time.py``; the planner's is
:func:`simulator.pipeline.planner.stage_time`)."""

from __future__ import annotations

from collections.abc import Sequence


def stage_time(compute_s: Sequence[float], parameter_bytes: Sequence[int], replicas: int,
               bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """``max(compute, ring all-reduce of the weights) / r``."""
    compute = sum(compute_s)
    weights = sum(parameter_bytes)
    r = replicas
    sync = 2 * (r - 1) * (latency_s + weights / r / bandwidth_Bps)
    return max(compute, sync) / r
