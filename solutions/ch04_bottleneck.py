"""Chapter 4, reference answer: the first-device bottleneck of DataParallel.

The exercise is in ``exercises/ch04_bottleneck.py``. The full closed form, with inputs,
outputs, loss and step, is ``data_parallel_step_cost`` in ``simulator/data_parallel.py``.
"""

from __future__ import annotations


def best_replica_count(max_devices: int, batch: int, param_bytes: float,
                       forward_s_per_sample: float, backward_s_per_sample: float,
                       alpha_s: float, beta_s_per_B: float, gamma_s_per_B: float) -> int:
    """The ``p ≤ max_devices`` with the shortest DataParallel iteration (smallest on a tie)."""
    if max_devices < 1 or batch < 1:
        raise ValueError(f"need at least one device and one sample, got {max_devices} "
                         f"devices and a batch of {batch}")
    per_sample = forward_s_per_sample + backward_s_per_sample

    def iteration_s(p: int) -> float:
        rows = -(-batch // p)  # ⌈b/p⌉ rows per chunk …
        k = -(-batch // rows)  # … and torch.chunk makes only this many chunks
        copy = alpha_s + param_bytes * beta_s_per_B
        return (k - 1) * copy + rows * per_sample + (k - 1) * (copy + param_bytes * gamma_s_per_B)

    return min(range(1, max_devices + 1), key=lambda p: (iteration_s(p), p))
