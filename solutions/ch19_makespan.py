"""Chapter 19, reference answer: the makespan of a closure queue pulled greedily.

Graham's list scheduling (1966) played out with a heap of ``(time free, worker)``: each closure
goes to the worker free first (ties: the lower index), and the run ends with the last finish.
Graded against :func:`simulator.tf_distribute.ps_strategy.simulate_closures`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def greedy_makespan(closures: int, per_closure_s: Sequence[float]) -> float:
    """Seconds until the last of ``closures`` closures ends, pulled from one queue by workers
    taking ``per_closure_s[w]`` s each (ties: the lower index takes first)."""
    free_at = [(0.0, w) for w in range(len(per_closure_s))]  # already a heap
    end = 0.0
    for _ in range(closures):
        start, w = heapq.heappop(free_at)
        finish = start + per_closure_s[w]
        end = max(end, finish)
        heapq.heappush(free_at, (finish, w))
    return end
