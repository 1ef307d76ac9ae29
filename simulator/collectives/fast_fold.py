"""Recursive doubling at any world size: the fold replayed on per-rank clocks, without a SimPy
process per rank (an exact fast path of :mod:`simulator.collectives.fast`).

:func:`~simulator.collectives.all_reduce.recursive_doubling_all_reduce` on ``p ≠ 2^k`` ranks
folds first (:class:`~simulator.collectives.schedule.Fold`, ``p' = 2^⌊lg p⌋``, ``e = p − p'``):

1. *fold in* — odd rank ``r < 2e`` sends its ``n`` bytes to ``r − 1``, which reduces them;
2. *doubling* — the ``p'`` survivors swap ``n`` bytes with new rank ``i XOR 2^k`` and reduce,
   ``k = 0 … lg p' − 1``, each step's receive posted a step ahead;
3. *fold out* — even rank ``r < 2e`` sends the result to ``r + 1``.

The survivors that took in a partner's buffer start the doubling ``α + n/B + g`` late, so the
ranks are no longer in lockstep, and a late rank may still be receiving step ``k`` while an
early one sends it step ``k + 1``. The replay is exact where that cannot slow a message: every
contended (``fifo``/``fair``) channel is crossed by the messages of one sender only
(:func:`fold_links`) — a rank has one message in flight at a time, so none ever shares a
contended channel — and each message takes ``α + n/B``. Then, with ``c_i`` survivor ``i``'s
clock and ``T_{i→j}`` its message's time, step ``k`` is, for all ``i`` at once::

    c_i ← max(c_i + T_{i→j}, c_j + T_{j→i}) + g_i        (j = i XOR 2^k)

``O(p)`` numpy work a step, ``O(p·lg p)`` in all. On a switch whose ports are contended two
senders' messages reach each rank's port, and the events must run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.collectives.exchange import buffer_nbytes
from simulator.collectives.fast_routes import send_links
from simulator.collectives.schedule import Fold
from simulator.core.hardware import Cluster


@dataclass(frozen=True)
class FoldLinks:
    """α (s) and B (bytes/s) of every message of the folded recursive doubling.

    ``fold_in[m]``: odd rank ``2m + 1`` to ``2m``; ``fold_out[m]``: ``2m`` to ``2m + 1``;
    ``steps[k][i]``: survivor ``i`` to survivor ``i XOR 2^k`` (new ranks)."""

    fold_in: tuple[np.ndarray, np.ndarray]
    steps: list[tuple[np.ndarray, np.ndarray]]
    fold_out: tuple[np.ndarray, np.ndarray]


def fold_links(cluster: Cluster) -> FoldLinks | None:
    """The links of every message of the folded doubling, or ``None`` where the replay is not
    exact: host effects, or a contended channel that two senders' messages cross."""
    p = cluster.world_size
    if not cluster.textbook_tier:
        return None
    fold = Fold(p)
    fold_in = [(2 * m + 1, 2 * m) for m in range(fold.extra)]
    survivors = [fold.old_rank(i) for i in range(fold.size)]
    steps = [[(survivors[i], survivors[i ^ (1 << k)]) for i in range(fold.size)]
             for k in range(fold.size.bit_length() - 1)]
    fold_out = [(b, a) for a, b in fold_in]
    pairs = fold_in + [pair for step in steps for pair in step] + fold_out
    latency, bandwidth, senders = send_links(cluster, pairs)
    if -1 in senders.values():
        return None
    cuts = np.cumsum([len(fold_in)] + [len(step) for step in steps])
    parts = list(zip(np.split(latency, cuts), np.split(bandwidth, cuts), strict=True))
    return FoldLinks(parts[0], parts[1:-1], parts[-1])


def folded_doubling_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                         links: FoldLinks | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.recursive_doubling_all_reduce` on
    any ``p``, s, where :func:`fold_links` finds it exact (``links``, else worked out here;
    ``Raises ValueError`` where it is not)."""
    links = links if links is not None else fold_links(cluster)
    if links is None:
        raise ValueError(f"recursive doubling on {cluster.name} has no exact fast path")
    p, n = cluster.world_size, buffer_nbytes(nbytes, itemsize)
    fold = Fold(p)
    reduce_s = np.array([cluster.reduce_s(r, n) for r in range(p)])
    clock = np.zeros(p)
    even = np.arange(0, 2 * fold.extra, 2)
    latency, bandwidth = links.fold_in
    arrived = latency + n / bandwidth  # the odd ranks send at 0
    clock[even + 1] = arrived  # a blocking send ends on delivery
    clock[even] = arrived + reduce_s[even]
    survivors = np.array([fold.old_rank(i) for i in range(fold.size)], dtype=np.int64)
    mine, gamma = clock[survivors], reduce_s[survivors]
    new = np.arange(fold.size)
    for k, (latency, bandwidth) in enumerate(links.steps):
        partner = new ^ (1 << k)
        delivered = mine + latency + n / bandwidth  # survivor i's message, at i ^ 2^k
        mine = np.maximum(delivered, delivered[partner]) + gamma
    clock[survivors] = mine
    latency, bandwidth = links.fold_out
    arrived = clock[even] + latency + n / bandwidth
    clock[even] = arrived
    clock[even + 1] = np.maximum(clock[even + 1], arrived)
    return float(clock.max())
