"""The pipeline bubble and step time in closed form, equal stages and free communication.

Two definitions of the bubble — keep them apart (``../shared/REFERENCES.md`` "Pipeline
parallel"): GPipe's share of the total time (Huang et al. 2019) and Megatron's ratio to the
ideal time (Narayanan et al. 2021).

Units: seconds.
"""

from __future__ import annotations

from simulator.pipeline.schedules.action import _check


def bubble_fraction(stages: int, microbatches: int, chunks: int = 1, *,
                    relative_to: str = "total") -> float:
    """The pipeline bubble of GPipe, 1F1B (``chunks = 1``) or interleaved 1F1B, equal stages.

    Two definitions of one quantity — keep them apart (``../shared/REFERENCES.md``):

    * ``relative_to="total"`` — share of the pipeline's time that a rank is idle,
      ``(p − 1) / (v·m + p − 1)`` (GPipe, Huang et al. 2019: ``(K−1)/(M+K−1)``);
    * ``relative_to="ideal"`` — bubble time over the ideal (bubble-free) time,
      ``(p − 1) / (v·m)`` (Megatron, Narayanan et al. 2021: ``(p−1)/m``, ``(1/v)·(p−1)/m``).

    The first is ``b/(1+b)`` of the second. With ``p`` stages, ``m`` micro-batches and ``v``
    chunks per rank.
    """
    _check(stages, microbatches)
    if chunks < 1:
        raise ValueError(f"chunks must be ≥ 1, got {chunks}")
    if relative_to == "total":
        return (stages - 1) / (chunks * microbatches + stages - 1)
    if relative_to == "ideal":
        return (stages - 1) / (chunks * microbatches)
    raise ValueError(f"relative_to must be 'total' or 'ideal', got {relative_to!r}")


def pipeline_time(stages: int, microbatches: int, forward_s: float, backward_s: float,
                  chunks: int = 1) -> float:
    """Closed-form step time with equal stages and free communication, s.

    ``(m + (p − 1)/v) · (t_f + t_b)``: ``m + p − 1`` clock ticks of ``t_f + t_b`` for GPipe and
    1F1B (torchgpipe's ``m + n − 1`` ticks, each forward and backward), with ``t_f``/``t_b``
    the forward/backward time of one whole stage (all its chunks) per micro-batch.
    """
    _check(stages, microbatches)
    return (microbatches + (stages - 1) / chunks) * (forward_s + backward_s)
