"""What the exact fast paths (:mod:`simulator.collectives.fast`) read off a cluster before they
replay a collective: each message's route, its path latency α (s) and bandwidth B (bytes/s),
and which contended (``fifo``/``fair``) channels it crosses.

On a textbook-tier cluster (no host effects) a message that meets no other message on a
contended channel takes ``α_path + n/B_path``: the route's latencies summed, then its bytes at
the slowest link's bandwidth (``none`` channels never interact). Every fast path starts from
that, and from a check that the messages which could meet on a contended channel are the ones
its reasoning accounts for.
"""

from __future__ import annotations

import itertools

import numpy as np

from simulator.core.hardware import Cluster
from simulator.core.network import Channel, Topology


def route_channels(topology: Topology, src: int, dst: int) -> list[Channel]:
    """The channels a message from ``src`` to ``dst`` crosses, without caching the route
    (``p·lg p`` routes would fill memory at 65,536 ranks). A pair's connection
    (:func:`~simulator.core.network.connection_channel`) is a host effect: never here."""
    if topology.router is not None:
        return list(itertools.pairwise(topology.router(topology, src, dst)))
    return list(topology.route(src, dst))


def send_links(cluster: Cluster, pairs: list[tuple[int, int]]
               ) -> tuple[np.ndarray, np.ndarray, dict[Channel, int]]:
    """Each message's path latency α (s) and bandwidth B (bytes/s), and for every contended
    (``fifo``/``fair``) channel the sender crossing it (-1 where two senders do)."""
    topology = cluster.topology
    latency, bandwidth = np.zeros(len(pairs)), np.zeros(len(pairs))
    senders: dict[Channel, int] = {}
    for i, (src, dst) in enumerate(pairs):
        channels = route_channels(topology, src, dst)
        links = [topology.link(c) for c in channels]
        latency[i] = sum(link.latency_s for link in links)
        bandwidth[i] = min((link.bandwidth_Bps for link in links), default=np.inf)
        for c, link in zip(channels, links, strict=True):
            if link.contention != "none" and senders.setdefault(c, src) != src:
                senders[c] = -1
    return latency, bandwidth, senders
