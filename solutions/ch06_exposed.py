"""Chapter 6, reference answer: the exposed communication in closed form (exercise in
``exercises/ch06_exposed.py``; textbook eq. eq-ddp-exposed)."""

from __future__ import annotations


def exposed_communication(bucket_bytes: float, total_bytes: float, backward_s: float,
                          a_s: float, beta_prime_s_per_B: float) -> float:
    """``max(a + bβ', (b/N)·T_b + (N/b)·a + Nβ' − T_b)``: the last bucket alone, or a queue
    that starts with the first bucket and never drains."""
    last_bucket = a_s + bucket_bytes * beta_prime_s_per_B
    buckets = total_bytes / bucket_bytes
    queued = backward_s / buckets + buckets * last_bucket - backward_s
    return max(last_bucket, queued)
