"""This machine's ranks on the shaped network: the cluster of a shaped-network calibration.

``distml-lab calibrate --network shaped --bandwidth …`` measures the ranks talking over links
shaped to given rates (:mod:`backends.shaped`); the switch that models them, its ports and
their framing, is :mod:`simulator.core.shaped`. This module builds that switch from the
calibration entry, as :mod:`simulator.host.cluster` builds the loopback host.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from simulator.core.calibration import CalibrationEntry, find_entry
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Contention


def shaped_host_cluster(world_size: int, bandwidth: str | Sequence[str | int] = "1gbit",
           backend: str = "gloo", path: str | Path | None = None,
           host: str | None = None) -> Cluster:
    """This machine's ranks on the shaped network of :mod:`backends.shaped`.

    A switch with one port per rank, rank ``k``'s port as fast as its link shaped to
    ``bandwidth`` (one rate, or one per rank) carries payload; α, the links' efficiency
    and the ranks' rates come from the calibration made on that very network
    (``distml-lab calibrate --network shaped --bandwidth …``). See
    :mod:`simulator.core.shaped`.
    """
    from simulator.core.shaped import network_key, parse_bandwidths

    parse_bandwidths(bandwidth, world_size)  # one rate, or exactly one per rank
    entry = find_entry(world_size, backend, host, path, network_key("shaped", bandwidth))
    return shaped_cluster_from_entry(entry, world_size)

def shaped_cluster_from_entry(entry: CalibrationEntry, world_size: int | None = None,
                bandwidth: str | Sequence[str | int] | None = None,
                contention: Contention = "fair") -> Cluster:
    """The shaped switch priced by a shaped-network calibration ``entry``.

    Each port carries half the fitted α and η·R_k/8 bytes/s, η the payload efficiency of
    the calibrated rank 0 ↔ 1 link (:func:`simulator.core.shaped.port_links`), and the
    acknowledgements of what it receives as the calibration's concurrent shift measured
    them (:func:`simulator.core.shaped.ack_fraction`); a message among others in flight
    pays the shift's latency. A send returns once the rest fits in the socket send buffer
    the calibration measured (``entry.send_buffer_bytes``; not measured: at once): the
    cluster's host effects (:class:`~simulator.core.host_hooks.ClusterEffects`). The rates
    R_k are the calibrated network's, or ``bandwidth``'s (what-if: other rates, the same
    framing).
    """
    from simulator.core.shaped import (
        ack_fraction,
        key_rates,
        parse_bandwidths,
        port_links,
        shaped_topology,
        spec_text,
    )

    world_size = world_size or entry.world_size
    calibrated = key_rates(entry.network)
    rates = parse_bandwidths(bandwidth if bandwidth is not None else calibrated,
                             world_size)
    device = Device(
        name=f"{entry.host}-cpu", flops_per_s=entry.flops_per_s,
        mem_bandwidth_Bps=3 * entry.reduce_Bps, memory_bytes=math.inf,
        reduce_Bps=entry.reduce_Bps, memcpy_Bps=entry.memcpy_Bps)
    acks = ack_fraction(entry.bandwidth_Bps, entry.bus_bandwidth_Bps, entry.world_size,
                        calibrated)
    ports = port_links(entry.latency_s, entry.bandwidth_Bps, calibrated, rates, contention,
                       acks)
    cluster = Cluster(f"shaped-{spec_text(rates)}x{world_size}", (device,) * world_size,
                      shaped_topology(ports, busy_latency_s=entry.bus_latency_s or None))
    return cluster.with_host(buffered_sends=True, send_buffer_bytes=entry.send_buffer_bytes)
