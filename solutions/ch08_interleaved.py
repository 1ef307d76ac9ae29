"""Chapter 8, reference answer: the pipeline's step time (exercise in
``exercises/ch08_interleaved.py``; the simulator's is
:func:`simulator.pipeline.schedules.bubble.pipeline_time`)."""

from __future__ import annotations


def pipeline_step_time(stages: int, microbatches: int, forward_s: float, backward_s: float,
                       chunks: int = 1) -> float:
    """``(m + (p − 1)/v)·(t_f + t_b)``: m ticks of work plus a bubble of ``p − 1`` chunk-ticks."""
    return (microbatches + (stages - 1) / chunks) * (forward_s + backward_s)
