"""Chapter 2, reference answer: where the ring all-reduce starts to beat recursive doubling.

The exercise is in ``exercises/ch02_crossover.py``. The two closed forms are
``ring_all_reduce_cost`` and ``recursive_doubling_all_reduce_cost`` in
``simulator/collectives/all_reduce.py`` (Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations

import math


def predict_crossover_bytes(p: int, alpha_s: float, beta_s_per_B: float,
                            gamma_s_per_B: float) -> float:
    """The buffer size ``n*`` (bytes) at which ``T_ring(n*) = T_rd(n*)`` on ``p`` ranks.

    Recursive doubling is faster below ``n*``, the ring above it; ``math.inf`` when the ring
    never wins (``p = 2`` with ``γ = 0``).
    """
    if p < 2:
        raise ValueError(f"a crossover needs at least 2 ranks, got p = {p}")
    # Both costs as a·α + b·n·β + c·n·γ (textbook eqs. eq-ar-rd and eq-ar-ring):
    #   recursive doubling  a = lg p,     b = lg p,        c = lg p
    #   ring                a = 2(p−1),   b = 2(p−1)/p,    c = (p−1)/p
    lg, share = math.log2(p), (p - 1) / p
    extra_latencies = 2 * (p - 1) - lg  # what the ring pays more: > 0 for every p ≥ 2
    # What recursive doubling pays more per byte: lg p ≥ 2(p−1)/p, equal only at p = 2, where
    # both send the same bytes and recursive doubling adds n bytes against the ring's n/2.
    extra_per_byte = (lg - 2 * share) * beta_s_per_B + (lg - share) * gamma_s_per_B
    if extra_per_byte <= 0:
        return math.inf  # p = 2, γ = 0: the ring's extra latency is never paid back
    return extra_latencies * alpha_s / extra_per_byte
