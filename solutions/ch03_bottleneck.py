"""Chapter 3, reference answer 3.3: the number of servers at which the bottleneck moves."""

from __future__ import annotations

import math


def servers_where_bottleneck_moves(workers: int, server_Bps: float, worker_Bps: float) -> int:
    """Smallest ``S`` with ``W/(S·B_s) <= 1/B_w``: ``ceil(W·B_w/B_s)``, at least 1."""
    ratio = workers * worker_Bps / server_Bps
    s = max(1, math.ceil(ratio - 1e-9 * ratio))
    return s
