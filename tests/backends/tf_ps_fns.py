"""Closures of tests/backends/test_tf_ps_strategy.py: module-level functions travel to the
worker tasks by name, and this module imports little, so a worker's first closure starts
fast."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from backends.tf_distribute import ps_measure as pm
from backends.tf_distribute.ps_channel import CONTEXT
from backends.tf_distribute.ps_strategy import ShardedVariable


def fail(message: str) -> None:
    raise ValueError(message)


def next_item(iterator: Iterator[tuple[int, int]]) -> tuple[int, int]:
    return next(iterator)


def numbered(worker_index: int) -> Iterator[tuple[int, int]]:
    """A per-worker dataset: ``(worker, k)`` for ``k = 0, 1, …``."""
    k = 0
    while True:
        yield worker_index, k
        k += 1


def paused_step(counter: ShardedVariable, emb: ShardedVariable, dense: ShardedVariable,
                ledger: ShardedVariable, batch: int, slot: int, pause_s: float) -> float:
    """Count the attempt on a ps, pause (a kill lands here), then one training step."""
    counter.assign_add(torch.ones(1, 1))
    time.sleep(pause_s)
    return pm.train_step(emb, dense, ledger, batch, slot)


def stall(seconds: float) -> None:
    time.sleep(seconds)


def stall_on(worker: int, seconds: float, others_s: float) -> int:
    """Hang for ``seconds`` on worker ``worker``, ``others_s`` elsewhere; the index of the
    worker that ran it."""
    time.sleep(seconds if CONTEXT.worker_index == worker else others_s)
    return CONTEXT.worker_index
