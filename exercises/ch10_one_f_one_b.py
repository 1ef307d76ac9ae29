"""Chapter 10 exercise: write the 1F1B schedule as a function.

PipeDream's 1F1B (one forward, one backward; textbook chapter 10, "1F1B") keeps every stage
busy in steady state by alternating a forward of a new micro-batch with a backward of the
oldest one in flight. With a flush at the end of each mini-batch (PipeDream-Flush, Narayanan
et al. 2021) it gives exactly GPipe's gradients while holding far fewer activations.

Grade your answer::

    make grade CH=10

and read ``solutions/ch10_one_f_one_b.py`` afterwards.
"""

from __future__ import annotations


def one_f_one_b(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """The 1F1B (PipeDream-Flush) schedule: for each stage, its actions in order.

    Args:
        stages: ``p`` ≥ 1.
        microbatches: ``m`` ≥ 1.

    Returns:
        ``p`` lists; list ``r`` holds stage ``r``'s actions in execution order, each
        ``("F", i)`` (forward of micro-batch ``i``) or ``("B", i)`` (its backward).
    """
    # ===== EXERCISE 10.1: the 1F1B schedule ===================================================
    #
    # Points: 8 (in proportion to the tests of ex10_1 that pass; `make grade EX=10.1`)
    #
    # Stage r (0 = first) runs three phases:
    #   1. warm-up: forwards of the first w_r micro-batches. How many must it run before the
    #      first backward can reach it? (The last stage needs none: its backward can follow
    #      its forward at once. Each earlier stage needs one more.) Careful when m < p.
    #   2. steady state: repeat "forward of the next micro-batch, backward of the oldest" until
    #      every forward has run;
    #   3. cool-down: the backwards still owed, oldest first.
    # For p = 4, m = 8 stage 0 runs F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7.
    #
    # What is graded (tests/exercises/test_ch10_one_f_one_b.py, `make grade CH=10`):
    #   - the literal schedule of the textbook's table for p = 4, m = 8;
    #   - for p = 1 … 8, m = 1 … 24: every stage runs each F and B exactly once; the
    #     dependencies can be met (F(i) on r after F(i) on r−1; B(i) on r after B(i) on r+1
    #     and F(i) on r); at most p − r micro-batches in flight on stage r;
    #   - sim vs formula: your schedule, timed with forward t_F and backward t_B, takes
    #     (m + p − 1)(t_F + t_B), like GPipe.
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 10.1: implement one_f_one_b in "
                              "exercises/ch10_one_f_one_b.py")
