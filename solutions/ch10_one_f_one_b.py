"""Chapter 10, reference answer: the 1F1B schedule as a function.

The exercise is in ``exercises/ch10_one_f_one_b.py``; the simulator's version, returning
:class:`~simulator.pipeline.schedules.Action` s, is
:func:`simulator.pipeline.schedules.one_f_one_b`.
"""

from __future__ import annotations


def one_f_one_b(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """Warm-up, steady 1F1B, cool-down, per stage (see the exercise)."""
    schedule = []
    for rank in range(stages):
        # The first backward reaches stage r after it has run p − r forwards: p − r − 1 of
        # them in warm-up, the last one opens the steady state.
        warmup = min(stages - rank - 1, microbatches)
        actions = [("F", i) for i in range(warmup)]
        for i in range(microbatches - warmup):
            actions += [("F", warmup + i), ("B", i)]
        actions += [("B", i) for i in range(microbatches - warmup, microbatches)]
        schedule.append(actions)
    return schedule
