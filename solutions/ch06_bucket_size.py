"""Chapter 6, reference answer: the best bucket size (exercise in
``exercises/ch06_bucket_size.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.ddp import assign_buckets


def predict_best_bucket_cap(backward_s: Sequence[float], param_bytes: Sequence[int],
                            caps: Sequence[int], world: int, alpha_s: float,
                            beta_s_per_B: float) -> int:
    """The cap among ``caps`` (bytes) with the shortest backward-plus-all-reduce time."""
    ready = [sum(backward_s[i:]) for i in range(len(backward_s))]  # layer i's gradient, s

    def finish(cap: int) -> float:
        end = 0.0
        for bucket in assign_buckets(param_bytes, cap, cap):
            nbytes = sum(param_bytes[i] for i in bucket)
            start = max(max(ready[i] for i in bucket), end)  # ready, and the link is free
            end = start + ring_all_reduce_cost(world, nbytes, alpha_s, beta_s_per_B)
        return end

    return min(caps, key=finish)
