"""The parameter server (PS-Lite), simulated: scheduler, servers, workers on the cluster model.

Twin of :mod:`backends.parameter_server` (book ch. 3; Li et al., *Scaling Distributed Machine
Learning with the Parameter Server*, OSDI 2014). The same roles and the same messages: rank 0
is the scheduler, ranks ``1 … S`` the servers, ranks ``S+1 … S+W`` the workers. The key space
``0 … K−1`` is split into one contiguous range per server (:func:`key_ranges`); every iteration
each worker

1. waits as its consistency model says (:func:`required_clock`): BSP and SSP ask the servers
   for the clock ``t − τ`` (every worker has pushed ``t − τ`` iterations), async never waits;
2. **pulls** the keys it needs — a request to each server that owns some of them, answered
   with the values;
3. **computes** its gradient (time from a compute profile measured on one process, plus a
   seeded straggler delay, :func:`straggler_delays`);
4. **pushes** the gradient, sliced by key range; in BSP it waits for the answer, which the
   server sends only once all ``W`` workers' pushes of that iteration are summed and applied.

Each message is what the real van sends: a header of :data:`HEADER_BYTES` bytes, then the keys
(8 B each, unless they form one range) and the values (4 B each) as separate messages
(:func:`message_nbytes`). A server handles one request at a time (its van's receiving thread),
so its NIC and its CPU are where the **bottleneck** forms as workers are added.

This module also holds what both twins share — the layout checks, key ranges, the seeded
synthetic datasets and straggler draws — so the real twin imports them from here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

HEADER_FIELDS = 14
"""int64 fields of a message header (``backends.parameter_server.message.Meta``)."""
HEADER_BYTES = 8 * HEADER_FIELDS
CONSISTENCY_MODELS = ("bsp", "ssp", "async")


class PSConfigError(ValueError):
    """A parameter-server configuration that cannot work (the message says why)."""


# ---- shared specs -------------------------------------------------------------------------------

def check_layout(servers: int, workers: int, world: int | None = None) -> None:
    """One scheduler, at least one server and one worker, and a world of ``1 + S + W``."""
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if workers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 worker, got {workers}")
    if world is not None and world != 1 + servers + workers:
        raise PSConfigError(f"{servers} servers and {workers} workers need a world of "
                            f"{1 + servers + workers} ranks (1 scheduler), got {world}")


def check_consistency(model: str, tau: int) -> None:
    """``model`` is bsp, ssp or async; τ ≥ 0."""
    if model not in CONSISTENCY_MODELS:
        raise PSConfigError(f"unknown consistency model {model!r}; choose one of "
                            f"{', '.join(CONSISTENCY_MODELS)}")
    if tau < 0:
        raise PSConfigError(f"the bounded delay τ must be >= 0, got {tau}")


def key_ranges(num_keys: int, servers: int,
               splits: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """Server ``s`` owns keys ``begin_s … end_s − 1`` (PS-Lite ``GetServerKeyRanges``).

    ``splits`` gives each server's first key (``splits[0] == 0``, increasing); by default the
    ranges are as equal as possible, the first ``num_keys mod S`` one key longer.
    """
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if num_keys < servers:
        raise PSConfigError(f"more servers ({servers}) than keys ({num_keys}): some server "
                            "would own no key")
    if splits is None:
        base, extra = divmod(num_keys, servers)
        splits = [s * base + min(s, extra) for s in range(servers)]
    starts = list(splits)
    if len(starts) != servers or starts[0] != 0 or any(
            b <= a for a, b in zip(starts, [*starts[1:], num_keys], strict=True)):
        raise PSConfigError(f"key splits {starts} must be {servers} increasing starts from 0, "
                            f"each below the next and below {num_keys} keys")
    return list(zip(starts, [*starts[1:], num_keys], strict=True))


def skewed_splits(num_keys: int, servers: int, hot_share: float) -> list[int]:
    """Splits giving server 0 a share ``hot_share`` of the keys, the others equal parts."""
    if servers == 1:
        return [0]
    if not 0 < hot_share < 1:
        raise PSConfigError(f"the hot server's share must be in (0, 1), got {hot_share}")
    hot = max(1, min(num_keys - servers + 1, round(hot_share * num_keys)))
    rest = key_ranges(num_keys - hot, servers - 1)
    return [0] + [hot + b for b, _ in rest]


def slice_bounds(keys: np.ndarray, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Positions ``[lo, hi)`` of each server's keys in a sorted key array."""
    starts = np.searchsorted(keys, [b for b, _ in ranges])
    ends = [*starts[1:].tolist(), len(keys)]
    return list(zip(starts.tolist(), ends, strict=True))


def message_nbytes(nkeys: int, nvals: int, keys_range: bool) -> list[int]:
    """The point-to-point messages one PS message is sent as: header, keys, values (bytes)."""
    parts = [HEADER_BYTES]
    if nkeys and not keys_range:
        parts.append(8 * nkeys)
    if nvals:
        parts.append(4 * nvals)
    return parts


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


def required_clock(model: str, iteration: int, tau: int) -> int | None:
    """The clock an SSP worker waits for before iteration ``t`` (``None``: no wait).

    SSP: every worker must have pushed ``t − τ`` iterations, so the weights it then pulls miss
    at most the last τ iterations of any worker (Ho et al. 2013, bounded staleness). BSP needs
    no clock: its push is answered only once the iteration's update is applied, so the next
    pull sees it. Async never waits.
    """
    if model != "ssp" or iteration - tau <= 0:
        return None
    return iteration - tau


# ---- seeded synthetic data --------------------------------------------------------------------

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
