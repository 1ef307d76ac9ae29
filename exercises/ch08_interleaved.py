"""Chapter 8 exercise: the step time of a pipeline, interleaved or not.

With ``p`` equal stages, ``m`` micro-batches and free communication, GPipe and 1F1B take
``m + p − 1`` clock ticks of one forward and one backward (textbook chapter 8, "Two ways to
state the bubble").
Megatron's interleaved 1F1B gives each rank ``v`` chunks of the model, so each chunk is a
``v``-th of the stage's work (Narayanan et al. 2021, §2.2). Here you write the step time for
both.

Grade your answer::

    make grade EX=8.3

and read ``solutions/ch08_interleaved.py`` afterwards.
"""

from __future__ import annotations


def pipeline_step_time(stages: int, microbatches: int, forward_s: float, backward_s: float,
                       chunks: int = 1) -> float:
    """Step time of GPipe / 1F1B (``chunks = 1``) or interleaved 1F1B, s.

    Args:
        stages: ``p`` ranks in the pipeline (≥ 1).
        microbatches: ``m`` (≥ 1; a multiple of ``p`` when ``chunks > 1``).
        forward_s: ``t_f``, one micro-batch's forward through one rank's *whole* share of the
            model (all its chunks), s.
        backward_s: ``t_b``, the same for backward, s.
        chunks: ``v``, model chunks per rank (≥ 1).
    """
    # ===== EXERCISE 8.3: the pipeline's step time =============================================
    #
    # Points: 6 (in proportion to the tests of ex08_3 that pass; `make grade EX=8.3`)
    #
    # Hints:
    #   1. Without interleaving: how long does a rank compute in all (m micro-batches), and how
    #      long does the last rank wait before its first forward and the first rank after its
    #      last backward? Draw p = 3, m = 4.
    #   2. With v chunks the ramp-up and ramp-down go through the p ranks once per pass but each
    #      hop costs only one chunk's time. Which part of hint 1's answer shrinks, and by what?
    #
    # What is graded (tests/exercises/test_ch08_interleaved.py):
    #   - equal to the simulator's closed form (simulator.pipeline.schedules.bubble);
    #   - equal to the critical path of the simulator's GPipe, 1F1B and interleaved 1F1B
    #     schedules (simulator.pipeline.schedules.critical_path.timeline).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 8.3: implement pipeline_step_time in "
                              "exercises/ch08_interleaved.py, then run `make grade EX=8.3`")
