"""Chapter 8 exercise: the pipeline bubble, both ways.

A pipeline of ``p`` stages runs ``m`` micro-batches; every stage waits while the pipeline fills
and drains (textbook chapter 8, "The bubble"). With equal stages, GPipe and 1F1B both take
``m + p − 1`` clock ticks of one forward plus one backward, of which each stage is busy for
``m``. Papers give the idle part two different ways — keep them apart (Huang et al. 2019,
GPipe, §2.3; Narayanan et al. 2021, §2.2).

Grade your answer::

    make grade CH=08

and read ``solutions/ch08_bubble.py`` afterwards.
"""

from __future__ import annotations


def bubble_fraction(stages: int, microbatches: int, relative_to: str = "total") -> float:
    """The bubble of a GPipe or 1F1B pipeline with equal stages.

    Args:
        stages: ``p`` ≥ 1.
        microbatches: ``m`` ≥ 1.
        relative_to: ``"total"`` — the idle share of all the stages' time (GPipe, Huang et al.
            2019); ``"ideal"`` — the idle time over the ideal, bubble-free time (Megatron,
            Narayanan et al. 2021).

    Returns:
        A plain float, dimensionless.

    Raises:
        ValueError: ``relative_to`` is neither ``"total"`` nor ``"ideal"``.
    """
    # ===== EXERCISE 8.1: compute the bubble ===================================================
    #
    # Points: 4 (in proportion to the tests of ex08_1 that pass; `make grade EX=8.1`)
    #
    # Draw the GPipe schedule for p = 3, m = 4 as a table (rank rows, tick columns; the
    # textbook's figure, or `print(simulator.pipeline.schedules.draw(...))` once you have
    # guessed). Then:
    #   1. How many ticks does the step take? How many of them is one stage busy?
    #   2. "total": idle ticks / all ticks, per stage (every stage idles equally).
    #   3. "ideal": idle ticks / busy ticks.
    #   4. Check: p = 4, m = 8 gives 3/11 and 3/8. How do the two relate (b_total as a
    #      function of b_ideal)?
    #
    # What is graded (tests/exercises/test_ch08_bubble.py, `make grade CH=08`):
    #   - both definitions for p = 1 … 32, m = 1 … 256 (Huang et al. 2019; Narayanan et al. 2021);
    #   - sim vs formula: the idle share of a simulated GPipe and 1F1B step (equal stages,
    #     any forward and backward times) equals your "total" bubble;
    #   - any other relative_to raises ValueError.
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 8.1: implement bubble_fraction in "
                              "exercises/ch08_bubble.py")
