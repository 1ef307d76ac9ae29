"""Chapter 4, reference answer: the linear gather's time (exercise in
``exercises/ch04_gather.py``; the simulator's closed form is
:func:`simulator.collectives.scatter_gather.linear_gather_cost`)."""

from __future__ import annotations


def gather_time(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float) -> float:
    """``α + (n/p)·β``: the ``p − 1`` pieces travel at once; 0 with one rank."""
    if p == 1:
        return 0.0
    return alpha_s + nbytes / p * beta_s_per_B
