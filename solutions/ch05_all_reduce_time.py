"""Chapter 5, reference answer: the all-reduce time of one DDP step (exercise in
``exercises/ch05_all_reduce_time.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from solutions.ch05_buckets import assign_buckets


def step_all_reduce_time(param_sizes: Sequence[int], bucket_cap_bytes: int,
                         first_bucket_bytes: int, p: int, alpha_s: float,
                         beta_s_per_B: float) -> float:
    """Σ_b 2(p−1)·(α + (n_b/p)·β): a ring all-reduce per bucket of ``n_b`` bytes."""
    total = 0.0
    for bucket in assign_buckets(param_sizes, bucket_cap_bytes, first_bucket_bytes):
        nbytes = sum(param_sizes[i] for i in bucket)
        total += 2 * (p - 1) * (alpha_s + nbytes / p * beta_s_per_B)
    return total
