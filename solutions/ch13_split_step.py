"""Chapter 13, reference answer: the split step's time (exercise in
``exercises/ch13_split_step.py``; the simulator's is :func:`simulator.rpc.split_step_cost`)."""

from __future__ import annotations

from collections.abc import Sequence


def split_step_time(stages: Sequence[tuple[float, float, float, int, int]], alpha_s: float,
                    beta_s_per_B: float, loss_s: float = 0.0) -> float:
    """Forward calls, the loss, the backward chain, ``2k − 1`` answers and one parallel step."""
    def message(nbytes: float) -> float:
        return alpha_s + nbytes * beta_s_per_B

    k = len(stages)
    forward = sum(message(a_in) + f + message(a_out) for f, _, _, a_in, a_out in stages)
    backward = sum(message(a_out) + b for _, b, _, _, a_out in stages)
    backward += sum(message(a_in) for _, _, _, a_in, _ in stages[1:])
    acknowledgements = (2 * k - 1) * alpha_s
    optimizer = 2 * alpha_s + max((u for _, _, u, _, _ in stages), default=0.0)
    return forward + loss_s + backward + acknowledgements + optimizer
