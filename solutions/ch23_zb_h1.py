"""Chapter 23, reference answer: the ZB-H1 schedule as a function.

The exercise is in ``exercises/ch23_zb_h1.py``; the simulator's version, returning
:class:`~simulator.pipeline.schedules.Action` s, is
:func:`simulator.pipeline.schedules.zero_bubble.zb_h1`.
"""

from __future__ import annotations


def zb_h1(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """1F1B's warm-up, then ``F``, ``I(k)``, ``W(k − r)``; the ``r`` deferred ``W`` s last."""
    schedule = []
    for rank in range(stages):
        warmup = min(stages - rank - 1, microbatches)
        actions = [("F", i) for i in range(warmup)]
        for k in range(microbatches):
            if warmup + k < microbatches:
                actions.append(("F", warmup + k))
            actions.append(("I", k))
            if k >= rank:  # stage r runs the weight gradient of r micro-batches ago
                actions.append(("W", k - rank))
        actions += [("W", k) for k in range(max(microbatches - rank, 0), microbatches)]
        schedule.append(actions)
    return schedule
