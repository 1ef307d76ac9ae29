"""Chapter 23 exercise: ZB-H1's bubble and step time from T_F, T_I and T_W.

Splitting the backward into an input-gradient pass (``T_I``; the paper's ``T_B``) and a
weight-gradient pass (``T_W``) shortens 1F1B's cool-down and fills it (textbook chapter 23,
"Deriving the bubble"; Qi et al. 2024). The step ends at the later of two branches after the
last stage's last ``I``.

Grade your answer::

    make grade EX=23.2

and read ``solutions/ch23_zb_bubble.py`` afterwards.
"""

from __future__ import annotations


def zb_h1_bubble(stages: int, forward_s: float, input_s: float, weight_s: float) -> float:
    """ZB-H1's idle time per stage in one step, s (equal stages, free communication, ``m ≥ p``).

    Args:
        stages: ``p`` ≥ 1.
        forward_s, input_s, weight_s: ``T_F``, ``T_I``, ``T_W`` of one stage and micro-batch, s.
    """
    # ===== EXERCISE 23.2: ZB-H1's bubble and step time =========================================
    #
    # Points: 6 (in proportion to the tests of ex23_2 that pass; `make grade EX=23.2`)
    #
    # Follow the chapter's derivation, but do not assume T_W ≤ T_I:
    #   1. when does the last stage finish its last I? It starts at (p − 1)T_F, never waits
    #      after that, and still owes p weight gradients then.
    #   2. two branches follow: the last stage's p remaining W's, and the last input gradient's
    #      way back through p − 1 stages plus stage 0's own W. The step ends at the LATER one.
    #   3. the bubble is the step minus the m(T_F + T_I + T_W) every stage computes; it must not
    #      depend on m. What is it when T_W > T_I?
    #   The result is exact when T_I ≤ T_F or T_W ≤ T_F; where both exceed T_F a stage's own W
    #   can hold up its next I and the true step is longer (the grader avoids that case).
    #
    # What is graded (tests/exercises/test_ch23_zb_bubble.py):
    #   - p = 4, m = 8, unit times: a bubble of 3 and a step of 27 (1F1B: 33);
    #   - T_W > T_I: the bubble stops at (p − 1)T_F;
    #   - random p, m ≥ p and times with T_I ≤ T_F or T_W ≤ T_F: your step equals the lab's
    #     ZB-H1 schedule placed in time (simulator/pipeline/schedules/split_backward.py,
    #     timeline_split), and your bubble the step minus m(T_F + T_I + T_W).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 23.2: implement zb_h1_bubble in "
                              "exercises/ch23_zb_bubble.py, then run `make grade EX=23.2`")


def zb_h1_step(stages: int, microbatches: int, forward_s: float, input_s: float,
               weight_s: float) -> float:
    """ZB-H1's step time for ``m = microbatches`` micro-batches, s (same assumptions)."""
    # EXERCISE 23.2 (continued): the work of one stage plus its bubble.
    raise NotImplementedError("EXERCISE 23.2: implement zb_h1_step in "
                              "exercises/ch23_zb_bubble.py, then run `make grade EX=23.2`")
