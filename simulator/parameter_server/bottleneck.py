"""Where the bottleneck moves as servers are added (exercise 3.3).

Workers and servers on one switch (:func:`star_cluster`), BSP on a dense model with no compute
and no software costs: :func:`bottleneck_sweep` times an iteration for each number of servers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simulator.core.hardware import Cluster
from simulator.parameter_server.models import dense_slices
from simulator.parameter_server.spec import PSCosts, PSSpec
from simulator.parameter_server.train import simulate


def star_cluster(servers: int, workers: int, server_Bps: float, worker_Bps: float,
                 latency_s: float = 1e-6) -> Cluster:
    """``1 + S + W`` hosts on one switch: each server's port runs at ``server_Bps``, every
    other port at ``worker_Bps`` (bytes/s); a message crosses two ports, so it goes at the
    slower of its two ends. ``latency_s``: α of a host-to-host path."""
    from simulator.core.hardware import Device
    from simulator.core.network import Link, Topology

    links: dict[frozenset[int | str], Link] = {
        frozenset((r, "sw")): Link(latency_s / 2, server_Bps if 1 <= r <= servers
                                   else worker_Bps)
        for r in range(1 + servers + workers)}

    def router(topo: Topology, src: int, dst: int) -> list[int | str]:
        return [src] if src == dst else [src, "sw", dst]

    topo = Topology(1 + servers + workers, links, "ps_star", router)
    host = Device("host", flops_per_s=1e12, mem_bandwidth_Bps=1e11, memory_bytes=math.inf)
    return Cluster.homogeneous("ps-star", host, topo)


def bottleneck_sweep(workers: int, server_Bps: float, worker_Bps: float, model_bytes: float,
                     servers: Sequence[int], rendezvous: bool = False,
                     iterations: int = 3) -> list[float]:
    """Time per iteration, s, for each ``S`` of ``servers``: BSP on a dense model of
    ``model_bytes`` (no compute, no software costs) on :func:`star_cluster`, every worker
    pushing and pulling all of it. ``rendezvous=False`` is PS-Lite's queued (ZeroMQ) van, where
    the ports are the only limit: time falls as servers are added until a server's port
    (``W·M/S`` each way) is no slower than a worker's (``M``), then stays flat. With
    ``rendezvous=True`` (this lab's gloo van: one receiving thread per node, blocking sends)
    a server moves one message at a time at the slower end's rate, so extra servers keep
    helping past that point and server bandwidth above a worker's buys nothing."""
    keys = int(model_bytes // 4)
    times = []
    for s in servers:
        spec = PSSpec(s, workers, "bsp", 0, dense_slices(keys, s, workers, iterations), True,
                      np.zeros((iterations, workers)), np.zeros((iterations, workers)),
                      PSCosts(*[0.0] * 8), rendezvous=rendezvous)
        timeline, _ = simulate(star_cluster(s, workers, server_Bps, worker_Bps), spec,
                               trace=False)
        times.append(timeline.time_per_iteration_s())
    return times
