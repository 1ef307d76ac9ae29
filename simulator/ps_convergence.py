"""Convergence per wall-clock second, simulated: training replayed on the simulated schedule.

The simulated parameter server (:mod:`simulator.parameter_server`) decides *when* each server
reads and updates its key range: its :class:`~simulator.parameter_server.PSTimeline` lists the
pulls and the applied pushes in simulated time order. Which weights a worker's gradient sees —
and so how BSP, SSP and async differ in loss per iteration (stale gradients, Ho et al. 2013) —
follows from that order alone. :func:`replay_sparse_lr` replays it with the real arithmetic of
sparse logistic regression (NumPy, the same data and batches as the real twin's
``SparseLRModel``): each pull copies the server's range as it is at that moment, each worker
computes its share of the batch's loss and gradient on the weights it pulled, and each apply
adds ``−lr·g`` for the pushes it names. The result is the loss per iteration against the
simulated time at which the iteration ended — the curve notebook 03 puts beside the measured
one. Plain SGD only (the update rule the replay knows).
"""

from __future__ import annotations

import numpy as np

from simulator.parameter_server import (
    PSTimeline,
    SparseLRData,
    batch_rows,
    key_ranges,
)


def _share(w: np.ndarray, feats: np.ndarray, labels: np.ndarray, rows: np.ndarray,
           batch_size: int, bias: int) -> tuple[float, np.ndarray]:
    """A worker's share of the global batch's mean logistic loss and its gradient (dense)."""
    f = feats[rows]
    logits = w[f].sum(axis=1) + w[bias]
    y = labels[rows]
    loss = np.sum(np.logaddexp(0.0, logits) - y * logits) / batch_size
    err = (1.0 / (1.0 + np.exp(-logits)) - y) / batch_size
    g = np.zeros_like(w)
    np.add.at(g, f.ravel(), np.repeat(err, f.shape[1]))
    g[bias] += err.sum()
    return float(loss), g


def replay_sparse_lr(timeline: PSTimeline, data: SparseLRData, servers: int, workers: int,
                     batch_size: int, lr: float,
                     splits: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Loss of each iteration (the workers' shares summed, each on the weights it pulled) and
    the simulated time it ended (the last worker's end), s. Weights start at zero."""
    feats, labels = data.arrays()
    bias = data.num_features
    ranges = key_ranges(data.num_keys, servers, splits)
    weights = np.zeros(data.num_keys)
    iterations = timeline.start_s.shape[0]
    pulled: dict[tuple[int, int], np.ndarray] = {}
    seen: dict[tuple[int, int], int] = {}
    grads: dict[tuple[int, int], np.ndarray] = {}
    losses = np.zeros((iterations, workers))
    needs = {}
    for t in range(iterations):
        for w in range(workers):
            rows = batch_rows(t, batch_size, data.num_examples, w, workers)
            keys = np.unique(np.append(feats[rows].ravel(), bias))
            needs[(w, t)] = (rows, sum(1 for b, e in ranges if np.any((keys >= b) & (keys < e))))
    for _, kind, server, pairs in timeline.events:
        b, e = ranges[server]
        for w, t in pairs:
            if kind == "pull":
                view = pulled.setdefault((w, t), np.zeros(data.num_keys))
                view[b:e] = weights[b:e]
                seen[(w, t)] = seen.get((w, t), 0) + 1
                rows, count = needs[(w, t)]
                if seen[(w, t)] == count:
                    losses[t, w], grads[(w, t)] = _share(view, feats, labels, rows,
                                                         batch_size, bias)
                    del pulled[(w, t)]
            else:
                weights[b:e] -= lr * grads[(w, t)][b:e]
    return losses.sum(axis=1), timeline.end_s.max(axis=1)
