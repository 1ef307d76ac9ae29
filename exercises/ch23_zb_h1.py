"""Chapter 23 exercise: write the ZB-H1 schedule as a function.

ZB-H1 (Qi, Wan, Huang and Lin, ICLR 2024, "Handcrafted pipeline schedules"; textbook chapter
23, "ZB-H1: the bubble shrinks at 1F1B's memory") is 1F1B with the backward split in two: ``I``,
the input gradient the previous stage waits for, and ``W``, the weight gradient nobody waits
for. Stage ``r`` holds ``r`` of its ``W`` s back and runs them in the cool-down, where 1F1B
idles.

Grade your answer::

    make grade EX=23.1

and read ``solutions/ch23_zb_h1.py`` afterwards.
"""

from __future__ import annotations


def zb_h1(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """The ZB-H1 schedule: for each stage, its actions in order.

    Args:
        stages: ``p`` ≥ 1.
        microbatches: ``m`` ≥ 1.

    Returns:
        ``p`` lists; list ``r`` holds stage ``r``'s actions in execution order, each
        ``("F", i)`` (forward of micro-batch ``i``), ``("I", i)`` (its input gradient) or
        ``("W", i)`` (its weight gradient).
    """
    # ===== EXERCISE 23.1: the ZB-H1 schedule ==================================================
    #
    # Points: 8 (in proportion to the tests of ex23_1 that pass; `make grade EX=23.1`)
    #
    # Start from 1F1B (exercise 10.1) and change its backward:
    #   1. warm-up: as 1F1B, min(p − r − 1, m) forwards on stage r;
    #   2. steady state, for each micro-batch k in turn: the next forward if one is left, then
    #      I(k) — the gradient the previous stage is waiting for — then ONE weight gradient.
    #      Which one? Stage r keeps r of them back: the last stage defers the most, since its
    #      cool-down would idle longest; the first defers none.
    #   3. cool-down: the W's still owed, oldest first.
    # For p = 3, m = 4 the textbook draws
    #   stage 0: F0 F1 F2 I0 W0 F3 I1 W1 I2 W2 I3 W3
    #   stage 1: F0 F1 I0 F2 I1 W0 F3 I2 W1 I3 W2 W3
    #   stage 2: F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3
    # (the table in the chapter adds idle ticks; these are the orders).
    #
    # What is graded (tests/exercises/test_ch23_zb_h1.py):
    #   - the literal orders for p = 3, m = 4 and p = 4, m = 8;
    #   - for p = 1 … 6, m = 1 … 12: each F, I, W once and I before W; equal to the lab's
    #     simulator/pipeline/schedules/zero_bubble.py zb_h1 (which PyTorch's
    #     ScheduleInterleavedZeroBubble agrees with), so also for m < p;
    #   - timed with F = I = W = 1 and m ≥ p: (p − 1) units of bubble, a third of 1F1B's, and
    #     at most p micro-batches in flight (F to W) on any stage.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 23.1: implement zb_h1 in exercises/ch23_zb_h1.py, "
                              "then run `make grade EX=23.1`")
