"""The host tier: this machine's cluster, built and solved from its calibration.

:mod:`simulator.core` is the textbook model — links with α and bandwidth, devices with FLOP/s,
contention, topologies and presets from data sheets. This package adds what one real host
measures beyond that: :mod:`~simulator.host.cluster` builds the local cluster from a
calibration entry; :mod:`~simulator.host.pingpong`, :mod:`~simulator.host.wakeup`,
:mod:`~simulator.host.bus` and :mod:`~simulator.host.reduction` solve its host effects by
simulating the primitives that measured them.
"""

from simulator.host.cluster import (
    chain_latencies,
    cluster_from_entry,
    exchange_bus_Bps,
    local_host_cluster,
    preset,
    send_buffers,
    shaped_cluster_from_entry,
    shaped_host_cluster,
    with_reductions,
)

__all__ = ["chain_latencies", "cluster_from_entry", "exchange_bus_Bps", "local_host_cluster",
           "preset", "send_buffers", "shaped_cluster_from_entry", "shaped_host_cluster",
           "with_reductions"]
