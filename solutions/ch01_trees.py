"""Chapter 1, reference answer: the binomial broadcast's time (exercise in
``exercises/ch01_trees.py``; the simulator's closed form is
:func:`simulator.collectives.broadcast.binomial_broadcast_cost`)."""

from __future__ import annotations


def binomial_broadcast_time(p: int, nbytes: float, alpha_s: float,
                            beta_s_per_B: float) -> float:
    """``⌈lg p⌉·(α + nβ)`` seconds: the holders double each round."""
    rounds, holders = 0, 1
    while holders < p:
        holders *= 2
        rounds += 1
    return rounds * (alpha_s + nbytes * beta_s_per_B)
