"""Chapter 2, reference answer: the ring all-reduce predicted from α, β and γ.

The exercise is in ``exercises/ch02_predict_ring.py``; the simulator's closed form is
``ring_all_reduce_cost`` in ``simulator/collectives/all_reduce.py`` (Patarasuk & Yuan 2009;
Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations


def predict_ring_all_reduce_s(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                              gamma_s_per_B: float) -> float:
    """Predicted time of one ring all-reduce of ``nbytes`` on ``p`` ranks, s::

        2(p−1)·α + 2·(p−1)/p·n·β + (p−1)/p·n·γ
    """
    steps = 2 * (p - 1)  # p − 1 of reduce-scatter, p − 1 of all-gather
    chunk = nbytes / p  # every step moves one chunk per rank
    sent = steps * chunk  # → 2n as p grows: the lower bound on all-reduce traffic
    reduced = (p - 1) * chunk  # only the reduce-scatter adds what it receives
    return steps * alpha_s + sent * beta_s_per_B + reduced * gamma_s_per_B
