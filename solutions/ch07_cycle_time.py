"""Chapter 7, reference answer: the self-clocked cycle and the best cycle time (exercise in
``exercises/ch07_cycle_time.py``)."""

from __future__ import annotations

from collections.abc import Sequence


def _ring(world: int, alpha_s: float, beta_s_per_B: float) -> tuple[float, float]:
    """``(a, β')`` of a ring all-reduce: ``a + n·β'`` s for ``n`` bytes."""
    return 2 * (world - 1) * alpha_s, 2 * (world - 1) / world * beta_s_per_B


def self_clocked_cycle(nbytes: float, backward_s: float, world: int, alpha_s: float,
                       beta_s_per_B: float, negotiation_s: float = 0.0
                       ) -> tuple[float, float] | None:
    """``(L, x)`` of {eq}`eq-horovod-cycle`, or ``None`` without a fixed point."""
    a, beta_prime = _ring(world, alpha_s, beta_s_per_B)
    per_byte = backward_s / nbytes - beta_prime
    if per_byte <= 0:
        return None
    x = (a + negotiation_s) / per_byte
    return x * backward_s / nbytes, x


def backward_and_communication_s(backward_s: Sequence[float], param_bytes: Sequence[int],
                                 cycle_s: float, world: int, alpha_s: float,
                                 beta_s_per_B: float, negotiation_s: float,
                                 threshold_bytes: int) -> float:
    """The background thread stepped cycle by cycle: end of the last all-reduce (or of
    backward, if later), s from the start of backward."""
    a, beta_prime = _ring(world, alpha_s, beta_s_per_B)
    order = list(reversed(range(len(backward_s))))  # the last layer's gradient comes first
    ready_at = [sum(backward_s[i:]) for i in order]
    sizes = [param_bytes[i] for i in order]
    t, taken, end = 0.0, 0, 0.0
    while taken < len(order):
        start = t
        ready = taken
        while ready < len(order) and ready_at[ready] <= start:
            ready += 1
        t = start + negotiation_s
        group = 0  # bytes in the open group (one dtype: greedy, in order)
        for i in range(taken, ready):
            if group and group + sizes[i] > threshold_bytes:
                t += a + group * beta_prime
                group = 0
            group += sizes[i]
        if group:
            t += a + group * beta_prime
            end = t
        taken = ready
        t = max(start + cycle_s, t)
    return max(end, sum(backward_s))


def predict_best_cycle_time(backward_s: Sequence[float], param_bytes: Sequence[int],
                            cycle_times_s: Sequence[float], world: int, alpha_s: float,
                            beta_s_per_B: float, negotiation_s: float,
                            threshold_bytes: int) -> float:
    """The cycle time among ``cycle_times_s`` with the shortest backward-plus-communication."""
    return min(cycle_times_s, key=lambda c: backward_and_communication_s(
        backward_s, param_bytes, c, world, alpha_s, beta_s_per_B, negotiation_s,
        threshold_bytes))
