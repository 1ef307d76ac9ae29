"""Chapter 1 exercise: why trees beat loops — the time of a binomial-tree broadcast.

A naive one-to-all has the root send ``n`` bytes to each of the ``p − 1`` others in turn:
``(p − 1)(α + nβ)``. A binomial tree lets every rank that already holds the message pass it on,
so the number of holders doubles each round (textbook chapter 1, "One to all: why trees beat
loops"). Here you write the tree's time in the α-β model.

Grade your answer::

    make grade EX=1.2

and read ``solutions/ch01_trees.py`` afterwards.
"""

from __future__ import annotations


def binomial_broadcast_time(p: int, nbytes: float, alpha_s: float,
                            beta_s_per_B: float) -> float:
    """Time of a binomial-tree broadcast of ``nbytes`` from one root to ``p`` ranks, s.

    Args:
        p: the number of ranks, root included (≥ 1; any integer, not only powers of two).
        nbytes: the message, bytes (sent whole at every hop).
        alpha_s: latency α per message, s.
        beta_s_per_B: time per byte β, s/B.

    Returns:
        The time until the last rank holds the message, s, on links that never contend.
    """
    # ===== EXERCISE 1.2: the binomial broadcast's time =======================================
    #
    # Points: 6 (in proportion to the tests of ex01_2 that pass; `make grade EX=1.2`)
    #
    # Hints:
    #   1. Every round costs one whole message, α + nβ, and rounds do not overlap on the
    #      critical path. So the question is only: how many rounds?
    #   2. Count holders: 1 before the first round; in each round every holder sends once.
    #      Write out p = 1, 2, 3, 4, 5, 8, 9 by hand before writing a formula.
    #   3. p need not be a power of two; the last round may be partly empty, but it still
    #      costs a full round. Integer arithmetic avoids floating-point log surprises.
    #
    # What is graded (tests/exercises/test_ch01_trees.py):
    #   - equal to the simulator's closed form for random p, n, α, β;
    #   - equal to the makespan of the simulated binomial broadcast (simulator.collectives).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 1.2: implement binomial_broadcast_time in "
                              "exercises/ch01_trees.py, then run `make grade EX=1.2`")
