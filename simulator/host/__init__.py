"""The host tier: this machine's cluster, built and solved from its calibration.

:mod:`simulator.core` is the textbook model — links with α and bandwidth, devices with FLOP/s,
contention, topologies and presets from data sheets. This package adds what one real host
measures beyond that: :mod:`~simulator.host.effects` names each *host effect* (what it is,
the primitive that measures it, the program that solves it);
:mod:`~simulator.host.cluster` builds the local cluster from a calibration entry with any of
them (:mod:`~simulator.host.factory`: in either tier), :mod:`~simulator.host.shaped` the
shaped network's; :mod:`~simulator.host.pingpong`, :mod:`~simulator.host.wakeup`,
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
    with_reductions,
)
from simulator.host.effects import HOST_EFFECTS, HostEffect
from simulator.host.shaped import shaped_cluster_from_entry, shaped_host_cluster

__all__ = ["HOST_EFFECTS", "HostEffect", "chain_latencies", "cluster_from_entry",
           "exchange_bus_Bps", "local_host_cluster", "preset", "send_buffers",
           "shaped_cluster_from_entry", "shaped_host_cluster", "with_reductions"]
