"""Automatic balancing: cut a profiled model into contiguous stages (torchgpipe §3.3).

A pipeline runs at the pace of its slowest stage, so the best contiguous partition of ``n``
layers into ``k`` stages minimises the largest stage cost — the *linear partition problem*.
torchgpipe offers two costs: **by time** (each layer's forward + backward time, measured) and
**by size** (each layer's memory: its activations plus ``param_scale`` copies of its
parameters — weights, gradients, optimizer state). Both are the same problem with different
weights, solved here exactly.

Algorithm: dynamic programming over prefixes (Skiena, *The Algorithm Design Manual*, §8.5).
``best[s][i]`` = the smallest possible largest stage cost when the first ``i`` layers form
``s`` stages::

    best[1][i] = w_0 + … + w_{i−1}
    best[s][i] = min over s−1 ≤ j < i of max(best[s−1][j], w_j + … + w_{i−1})

``O(k·n²)`` time with prefix sums. Among equally good partitions it cuts each stage as early as
possible, walking back from the last stage, so later stages take the spare layers.
(torchgpipe itself uses the block-partition algorithm of Bárány & Grinberg; any exact method
gives the same optimum, maybe a different tie.)
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.pipeline.profile import LayerProfile


def balance_cost(costs: Sequence[float], partitions: int) -> list[int]:
    """Layers per stage of the contiguous partition of ``costs`` minimising the largest sum."""
    n = len(costs)
    if partitions < 1:
        raise ValueError(f"need at least 1 partition, got {partitions}")
    if n < partitions:
        raise ValueError(f"cannot cut {n} layers into {partitions} partitions of at least "
                         f"one layer each")
    if any(c < 0 for c in costs):
        raise ValueError("layer costs must be ≥ 0")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    tol = 1e-12 * prefix[-1]  # sums that differ only by rounding are ties
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(partitions + 1)]
    cut = [[0] * (n + 1) for _ in range(partitions + 1)]
    best[0][0] = 0.0
    for s in range(1, partitions + 1):
        for i in range(s, n - partitions + s + 1):
            for j in range(s - 1, i):
                value = max(best[s - 1][j], prefix[i] - prefix[j])
                if value < best[s][i] - tol:
                    best[s][i], cut[s][i] = value, j
    sizes, i = [], n
    for s in range(partitions, 0, -1):
        j = cut[s][i]
        sizes.append(i - j)
        i = j
    return sizes[::-1]


def balance_by_time(profile: Sequence[LayerProfile], partitions: int) -> list[int]:
    """torchgpipe's ``balance_by_time``: equalise forward + backward time per stage."""
    return balance_cost([layer.time_s for layer in profile], partitions)


def balance_by_size(profile: Sequence[LayerProfile], partitions: int,
                    param_scale: float = 2.0) -> list[int]:
    """torchgpipe's ``balance_by_size``: equalise memory per stage.

    A layer weighs ``activation_bytes + param_scale · parameter_bytes``; ``param_scale`` counts
    the copies of the parameters training keeps: 2 for plain SGD (weights and gradients), 4 for
    Adam (plus two moments).
    """
    if param_scale < 0:
        raise ValueError(f"param_scale must be ≥ 0, got {param_scale}")
    return balance_cost([layer.activation_bytes + param_scale * layer.parameter_bytes
                         for layer in profile], partitions)


def stage_sums(costs: Sequence[float], balance: Sequence[int]) -> list[float]:
    """The cost of each stage of ``balance`` (sum of its layers' costs)."""
    sums, start = [], 0
    for b in balance:
        sums.append(sum(costs[start:start + b]))
        start += b
    return sums
