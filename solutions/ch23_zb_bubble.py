"""Chapter 23, reference answer: ZB-H1's bubble and step time.

The exercise is in ``exercises/ch23_zb_bubble.py``; the simulator's versions are
:func:`simulator.pipeline.schedules.zero_bubble.zb_h1_bubble_s` and ``zb_h1_time_s``.
"""

from __future__ import annotations


def zb_h1_bubble(stages: int, forward_s: float, input_s: float, weight_s: float) -> float:
    """``(p − 1)·T_F`` of start-up, plus the cool-down branch that outlasts the deferred W's:
    ``max((p − 1)T_I + T_W, p·T_W) − p·T_W = (p − 1)·max(T_I − T_W, 0)``."""
    return (stages - 1) * (forward_s + max(input_s - weight_s, 0.0))


def zb_h1_step(stages: int, microbatches: int, forward_s: float, input_s: float,
               weight_s: float) -> float:
    """``m(T_F + T_I + T_W)`` of work plus the bubble."""
    return (microbatches * (forward_s + input_s + weight_s)
            + zb_h1_bubble(stages, forward_s, input_s, weight_s))
