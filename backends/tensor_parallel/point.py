"""A grid point of the small GPT (:class:`GridPoint`: ``t × p × d`` ranks, sequence
parallelism, batch, model sizes) and the ops a profile records for it (:data:`Op`): what the
rank programs of :mod:`backends.tensor_parallel.measure` run and the lab's prediction
replays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from backends import tensor_parallel as tp

Op = tuple[str, str, float]
"""``("compute", "", seconds)`` or ``(kind, group, bytes)`` with kind ``all_reduce``,
``all_gather`` or ``reduce_scatter`` and group ``tensor`` or ``data``."""


@dataclass(frozen=True)
class GridPoint:
    """One configuration: ``t × p × d`` ranks, sequence parallelism or not, the global batch
    (sequences per step, split over the ``d`` replicas) and, with ``p > 1``, the micro-batches
    per replica (1F1B on :mod:`backends.megatron`)."""

    t: int
    d: int
    sequence_parallel: bool = False
    global_batch: int = 8
    layers: int = 2
    hidden: int = 32
    heads: int = 4
    vocab: int = 64
    seq: int = 16
    p: int = 1
    microbatches: int = 1

    @property
    def world(self) -> int:
        return self.t * self.p * self.d

    @property
    def config(self) -> tp.GPTConfig:
        return tp.GPTConfig(self.layers, self.hidden, self.heads, self.vocab, self.seq)

    @property
    def name(self) -> str:
        pipe = f"p{self.p}" if self.p > 1 else ""
        micro = f"m{self.microbatches}" if self.p > 1 else ""
        return f"t{self.t}{pipe}d{self.d}{micro}{'-sp' if self.sequence_parallel else ''}"


def _model(point: GridPoint, tensor: Any) -> tuple[tp.ParallelGPT, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = tp.ParallelGPT(point.config, tensor, point.sequence_parallel)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _batch(point: GridPoint, dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, targets = tp.lm_batch(point.config, point.global_batch, seed=1)
    return (tp.batch_shard(tokens, point.d, dp_rank), tp.batch_shard(targets, point.d, dp_rank))


def point_fields(point: GridPoint) -> dict[str, Any]:
    """The point as plain fields (to send to rank processes)."""
    return asdict(point)


def _compute(ops: Sequence[Op]) -> float:
    return math.fsum(v for k, _, v in ops if k == "compute")
