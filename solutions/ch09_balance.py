"""Chapter 9, reference answer: balance a model by time.

The exercise is in ``exercises/ch09_balance.py``; the simulator's version (also by size) is
:mod:`simulator.pipeline.balance`.
"""

from __future__ import annotations

from collections.abc import Sequence


def balance_by_time(times_s: Sequence[float], partitions: int) -> list[int]:
    """Contiguous partition minimising the slowest partition, by dynamic programming."""
    n = len(times_s)
    prefix = [0.0]
    for t in times_s:
        prefix.append(prefix[-1] + t)
    inf = float("inf")
    # best[s][i]: smallest slowest partition for the first i layers in s partitions
    best = [[inf] * (n + 1) for _ in range(partitions + 1)]
    cut = [[0] * (n + 1) for _ in range(partitions + 1)]
    best[0][0] = 0.0
    for s in range(1, partitions + 1):
        for i in range(s, n + 1):
            for j in range(s - 1, i):
                value = max(best[s - 1][j], prefix[i] - prefix[j])
                if value < best[s][i]:
                    best[s][i], cut[s][i] = value, j
    balance, i = [], n
    for s in range(partitions, 0, -1):  # walk the cuts back from the last partition
        balance.append(i - cut[s][i])
        i = cut[s][i]
    return balance[::-1]
