"""The workloads as flat key spaces, seeded: sparse logistic regression and a small MLP.

Twin of :mod:`backends.parameter_server.models`. :class:`SparseLRData` generates the sparse
dataset from a seed; :func:`batch_rows` and :func:`worker_keys` say which rows and keys a
worker's shard of a batch touches; :func:`mlp_num_params` sizes the MLP. For the simulator,
:func:`sparse_lr_slices` and :func:`dense_slices` count the keys each worker moves to and from
each server per iteration (``PSSpec.slices``), and :func:`straggler_delays` draws the seeded
straggler delays both twins add to the workers' compute.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.parameter_server.postoffice import key_ranges, slice_bounds


@dataclass(frozen=True)
class SparseLRData:
    """A sparse binary-feature logistic-regression dataset, generated from a seed.

    Example ``i`` has ``nnz`` distinct active features out of ``num_features`` (drawn uniformly,
    or with Zipf weights ``1/(f+1)^zipf`` so that low feature ids are hot — the skew a real click
    log has), and label ``1`` with probability ``σ(x·w*)`` for a seeded true weight vector.
    Key ``num_features`` is the bias.
    """

    num_features: int = 1000
    num_examples: int = 4096
    nnz: int = 16
    seed: int = 0
    zipf: float = 0.0

    @property
    def num_keys(self) -> int:
        return self.num_features + 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(features [N, nnz] int64, labels [N] float32)``."""
        rng = np.random.default_rng(self.seed)
        p = 1.0 / np.arange(1, self.num_features + 1) ** self.zipf
        p /= p.sum()
        feats = np.stack([np.sort(rng.choice(self.num_features, self.nnz, replace=False, p=p))
                          for _ in range(self.num_examples)])
        w_true = rng.normal(0.0, 1.0, self.num_features) / math.sqrt(self.nnz)
        logits = w_true[feats].sum(axis=1)
        labels = (rng.random(self.num_examples) < 1 / (1 + np.exp(-logits))).astype(np.float32)
        return feats.astype(np.int64), labels


def batch_rows(iteration: int, batch_size: int, num_examples: int, worker: int,
               workers: int) -> np.ndarray:
    """Rows of worker ``worker``'s shard of global batch ``iteration``: every ``W``-th row."""
    start = (iteration * batch_size) % num_examples
    rows = (start + np.arange(batch_size)) % num_examples
    return rows[worker::workers]


def worker_keys(feats: np.ndarray, rows: np.ndarray, num_features: int) -> np.ndarray:
    """The sorted keys a worker pulls and pushes for these rows: their features and the bias."""
    return np.unique(np.append(feats[rows].ravel(), num_features))


def mlp_num_params(sizes: Sequence[int]) -> int:
    """Parameters of an MLP with layer widths ``sizes`` (weights and biases)."""
    return sum(a * b + b for a, b in itertools.pairwise(sizes))


def dense_slices(num_keys: int, servers: int, workers: int, iterations: int,
                 splits: Sequence[int] | None = None) -> np.ndarray:
    """Every worker pulls and pushes every key: each server's range size."""
    sizes = [e - b for b, e in key_ranges(num_keys, servers, splits)]
    return np.broadcast_to(np.array(sizes), (iterations, workers, servers)).copy()


def sparse_lr_slices(data: SparseLRData, servers: int, workers: int, iterations: int,
                     batch_size: int, splits: Sequence[int] | None = None) -> np.ndarray:
    """Keys per server that each worker's shard of each batch touches (exactly the real ones)."""
    feats, _ = data.arrays()
    ranges = key_ranges(data.num_keys, servers, splits)
    out = np.zeros((iterations, workers, servers), dtype=np.int64)
    for t in range(iterations):
        for w in range(workers):
            keys = worker_keys(feats, batch_rows(t, batch_size, data.num_examples, w, workers),
                               data.num_features)
            out[t, w] = [hi - lo for lo, hi in slice_bounds(keys, ranges)]
    return out


def straggler_delays(seed: int, iterations: int, workers: int, mean_s: float,
                     slow_workers: int = 1) -> np.ndarray:
    """Extra seconds each worker spends in each iteration, ``[iterations, workers]``.

    The first ``slow_workers`` workers are stragglers: each iteration they lose an
    exponentially distributed time of mean ``mean_s`` (seeded); the others lose none.
    """
    delays = np.zeros((iterations, workers))
    if mean_s > 0 and slow_workers > 0:
        rng = np.random.default_rng(seed)
        delays[:, :slow_workers] = rng.exponential(mean_s, (iterations, slow_workers))
    return delays
