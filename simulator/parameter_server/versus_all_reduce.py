"""The classic comparison: a BSP parameter server against ring all-reduce.

Sparse gradients favour the parameter server, which moves only the keys touched; dense ones
favour the ring all-reduce (:func:`ps_vs_all_reduce`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simulator.core.comm import run_spmd
from simulator.core.hardware import Cluster
from simulator.parameter_server.models import dense_slices
from simulator.parameter_server.spec import PSCosts, PSSpec
from simulator.parameter_server.train import simulate


def ps_vs_all_reduce(make_cluster: Callable[[int], Cluster], workers: int, servers: int,
                     num_keys: int, touched: float, compute_s: float,
                     iterations: int = 4) -> tuple[float, float]:
    """Time per iteration, s: BSP parameter server against ring all-reduce data parallelism.

    The same ``W`` workers and model (``num_keys`` float32 parameters) and the same compute.
    Each worker's gradient touches a share ``touched`` of the keys: the parameter server moves
    only those (with their keys, unless every key is touched), the ring all-reduce the whole
    dense gradient, ``2(W−1)/W`` of it per rank (Patarasuk & Yuan 2009). ``make_cluster(p)``
    builds a ``p``-rank cluster (the PS needs ``1 + S + W``, the ring ``W``).
    """
    from simulator.collectives.all_reduce import ring_all_reduce

    keys = max(servers, round(touched * num_keys))
    slices = dense_slices(keys, servers, workers, iterations)
    spec = PSSpec(servers, workers, "bsp", 0, slices, touched >= 1.0,
                  np.full((iterations, workers), compute_s), np.zeros((iterations, workers)),
                  PSCosts(*[0.0] * 8))
    ps = simulate(make_cluster(1 + servers + workers), spec, trace=False)[0]
    ring = 0.0
    if workers > 1:
        ring = run_spmd(make_cluster(workers), ring_all_reduce, 4 * num_keys,
                        trace=False).makespan_s
    return ps.time_per_iteration_s(), compute_s + ring
