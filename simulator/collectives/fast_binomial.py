"""Binomial broadcast and reduce from rank 0 replayed rank by rank, without a SimPy process per
rank (exact fast paths of :mod:`simulator.collectives.fast`).

In :func:`~simulator.collectives.broadcast.binomial_broadcast` rank ``v`` receives from
``v − lowbit(v)`` and then sends, one blocking send after another, to ``v + m`` for ``m`` from
half its lowest set bit down to 1 (largest subtree first). In
:func:`~simulator.collectives.reduce.binomial_reduce` rank ``v`` receives and reduces from
``v + m`` for ``m = 1, 2, …`` below its lowest set bit, in that order, and then sends to
``v − lowbit(v)``. Every rank's clock follows from one other's, so a pass over the ranks in
order (broadcast) or in reverse (reduce) replays it, ``O(p)``.

The replay is exact where every contended (``fifo``/``fair``) channel is crossed by the
messages of one sender only (:func:`binomial_links`): a rank sends one message at a time, so
none shares such a channel, and each takes ``α + n/B``. The broadcast meets that on a switch
(each rank's port receives one message, sends its own one by one); the reduce, whose
children's messages come to one port while others are still on their way, does not.
"""

from __future__ import annotations

import numpy as np

from simulator.collectives.exchange import buffer_nbytes
from simulator.collectives.fast_routes import send_links
from simulator.core.hardware import Cluster


def binomial_pairs(p: int) -> list[tuple[int, int]]:
    """The broadcast's messages ``(v − lowbit(v), v)`` for ``v = 1 … p−1`` (the reduce's are
    the same pairs reversed), in the order of ``v``."""
    return [(v - (v & -v), v) for v in range(1, p)]


def binomial_links(cluster: Cluster, reduce: bool = False
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """α (s) and B (bytes/s) of the message between ``v`` and its parent, for ``v = 1 … p−1``
    (parent to ``v``, or ``v`` to parent for the reduce), or ``None`` where the replay is not
    exact: host effects, or a contended channel that two senders' messages cross."""
    if not cluster.textbook_tier:
        return None
    pairs = binomial_pairs(cluster.world_size)
    latency, bandwidth, senders = send_links(
        cluster, [(b, a) for a, b in pairs] if reduce else pairs)
    if -1 in senders.values():
        return None
    return np.concatenate(([np.nan], latency)), np.concatenate(([np.nan], bandwidth))


def binomial_broadcast_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                            links: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.broadcast.binomial_broadcast` from rank 0, s."""
    links = links if links is not None else binomial_links(cluster)
    if links is None:
        raise ValueError(f"the binomial broadcast on {cluster.name} has no exact fast path")
    p, n = cluster.world_size, buffer_nbytes(nbytes, itemsize)
    latency, bandwidth = links
    clock = [0.0] * p  # when rank v has the data, then when it is done
    for v in range(p):  # a parent comes before its children
        mask, now = (v & -v if v else 1 << (p - 1).bit_length()) >> 1, clock[v]
        while mask:
            if v + mask < p:
                now = now + float(latency[v + mask]) + n / float(bandwidth[v + mask])
                clock[v + mask] = now  # a blocking send ends on delivery
            mask >>= 1
        clock[v] = now
    return max(clock)


def binomial_reduce_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                         links: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.reduce.binomial_reduce` to rank 0, s."""
    links = links if links is not None else binomial_links(cluster, reduce=True)
    if links is None:
        raise ValueError(f"the binomial reduce on {cluster.name} has no exact fast path")
    p, n = cluster.world_size, buffer_nbytes(nbytes, itemsize)
    latency, bandwidth = links
    arrived, finish = [0.0] * p, [0.0] * p
    for v in reversed(range(p)):  # children come before their parent
        now, mask = 0.0, 1
        while mask < p:
            if v & mask:
                arrived[v] = now + float(latency[v]) + n / float(bandwidth[v])
                now = arrived[v]  # a blocking send ends on delivery
                break
            if v + mask < p:
                now = max(now, arrived[v + mask]) + cluster.reduce_s(v, n)
            mask <<= 1
        finish[v] = now
    return max(finish)
