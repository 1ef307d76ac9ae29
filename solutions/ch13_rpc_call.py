"""Chapter 13, reference answer: the cost of RPC calls (exercise in
``exercises/ch13_rpc_call.py``; textbook eq. eq-rpc-call)."""

from __future__ import annotations

from collections.abc import Sequence


def calls_time(calls: Sequence[tuple[int, int, float]], alpha_s: float, beta_s_per_B: float,
               asynchronous: bool) -> float:
    """``T_call = 2α + (n_in + n_out)β + t_exec``; summed if synchronous, the max if not."""
    times = [2 * alpha_s + (n_in + n_out) * beta_s_per_B + exec_s
             for n_in, n_out, exec_s in calls]
    if not times:
        return 0.0
    return max(times) if asynchronous else sum(times)
