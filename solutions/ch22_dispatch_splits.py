"""Chapter 22, reference answer: the dispatch's split sizes from the routing table.

The exercise is in ``exercises/ch22_dispatch_splits.py``; the lab's layer learns the same lists
with a count exchange in :meth:`backends.moe.parallel.ExpertParallelMoE.forward`.
"""

from __future__ import annotations

from collections.abc import Sequence


def dispatch_splits(counts: Sequence[Sequence[int]], rank: int
                    ) -> tuple[list[int], list[int]]:
    """Send: this rank's row summed per destination's block of experts. Receive: every row's
    count for this rank's block of experts."""
    p = len(counts)
    m = len(counts[0]) // p
    mine = slice(rank * m, (rank + 1) * m)
    send = [sum(counts[rank][j * m:(j + 1) * m]) for j in range(p)]
    recv = [sum(counts[s][mine]) for s in range(p)]
    return send, recv
