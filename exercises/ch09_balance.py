"""Chapter 9 exercise: balance a model by time (torchgpipe's ``balance_by_time``).

torchgpipe cuts an ``nn.Sequential`` into contiguous partitions given a *balance* — the number
of layers in each (textbook chapter 9, "Automatic balancing"). A pipeline runs at the pace of
its slowest stage, so the best balance minimises the largest stage time. Here you find it from
a profile of per-layer times.

Grade your answer::

    make grade CH=09

and read ``solutions/ch09_balance.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def balance_by_time(times_s: Sequence[float], partitions: int) -> list[int]:
    """Layers per partition: contiguous, each non-empty, minimising the slowest partition.

    Args:
        times_s: each layer's forward + backward time, s (≥ 0), in model order.
        partitions: ``k``, 1 ≤ k ≤ number of layers.

    Returns:
        ``balance``: ``k`` positive integers summing to the number of layers, such that the
        largest sum of ``times_s`` over a partition is as small as possible.
    """
    # ===== EXERCISE 9.1: balance by time ======================================================
    #
    # Points: 8 (in proportion to the tests of ex09_1 that pass; `make grade EX=9.1`)
    #
    # Two ways, pick one (or both, and compare):
    #   (a) dynamic programming over prefixes: best[s][i] = the smallest possible slowest
    #       partition when the first i layers form s partitions;
    #       best[s][i] = min over j of max(best[s−1][j], time of layers j … i−1).
    #       Keep the argmin j to walk back the cuts.
    #   (b) binary search on the answer T: can the layers be cut into ≤ k partitions of time
    #       ≤ T each? (greedy: fill each partition until the next layer would exceed T). The
    #       optimal T is one of the O(n²) contiguous sums.
    # Prefix sums make the time of layers j … i−1 one subtraction.
    #
    # What is graded (tests/exercises/test_ch09_balance.py, `make grade CH=09`):
    #   - a valid balance (k positive parts summing to n) whose slowest partition equals the
    #     brute-force optimum over every contiguous cut, for random profiles;
    #   - sim vs you: in the simulated GPipe pipeline with your balance, each extra
    #     micro-batch costs as little as with the best balance (the slowest stage's time).
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 9.1: implement balance_by_time in "
                              "exercises/ch09_balance.py")
