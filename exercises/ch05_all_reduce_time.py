"""Chapter 5 exercise: what buckets cost — the all-reduce time of one DDP step.

DDP all-reduces one bucket at a time (textbook chapter 5, "Gradient reduction"). Without any
overlap with backward, the step's communication is the sum of the buckets' ring all-reduces.
Each pays the latency terms again, so the bucket size trades latency against the chance to
start early (chapter 6 prices the overlap). Here you add up the communication.

Grade your answer::

    make grade EX=5.3

and read ``solutions/ch05_all_reduce_time.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def step_all_reduce_time(param_sizes: Sequence[int], bucket_cap_bytes: int,
                         first_bucket_bytes: int, p: int, alpha_s: float,
                         beta_s_per_B: float) -> float:
    """Total time of one step's ring all-reduces, one per bucket, none overlapped, s.

    Args:
        param_sizes: bytes of each parameter's gradient, in registration order.
        bucket_cap_bytes: the cap of every bucket after the first, bytes (> 0).
        first_bucket_bytes: the cap of the first bucket, bytes (> 0).
        p: ranks (≥ 1).
        alpha_s: latency α per message, s.
        beta_s_per_B: time per byte β, s/B.

    Returns:
        Σ over buckets of the ring all-reduce time of that bucket's bytes, s.
    """
    # ===== EXERCISE 5.3: the all-reduce time of a step ========================================
    #
    # Points: 6 (in proportion to the tests of ex05_3 that pass; `make grade EX=5.3`)
    #
    # Hints:
    #   1. First the buckets: the rule of exercise 5.1 (you may import your own
    #      `assign_buckets` from exercises.ch05_buckets, or write it again).
    #   2. A ring all-reduce of n bytes on p ranks is a reduce-scatter then an all-gather. Count
    #      the steps of each phase and the bytes one rank sends per step (textbook chapter 2,
    #      "Ring"); each step is one message of α + (bytes)·β.
    #   3. With one rank there is nothing to send. Empty buckets (all sizes 0) still pay α.
    #
    # What is graded (tests/exercises/test_ch05_all_reduce_time.py):
    #   - equal, on random models and caps, to the sum over simulator.ddp.assign_buckets of
    #     the simulator's ring all-reduce closed form.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 5.3: implement step_all_reduce_time in "
                              "exercises/ch05_all_reduce_time.py, then run `make grade EX=5.3`")
