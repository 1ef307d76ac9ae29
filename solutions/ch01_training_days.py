"""Chapter 1, reference answer: training time from the FLOP count (exercise in
``exercises/ch01_training_days.py``; the simulator's is
:func:`simulator.transformer.training_days`)."""

from __future__ import annotations

SECONDS_PER_DAY = 86_400


def training_days(tokens: float, params: float, gpus: int, flops_per_gpu: float) -> float:
    """``8·T·P / (n·X)`` seconds in days: 2 FLOPs forward, 4 backward, 2 recomputed."""
    flops_per_param_token = 2 + 4 + 2
    return flops_per_param_token * tokens * params / (gpus * flops_per_gpu) / SECONDS_PER_DAY
