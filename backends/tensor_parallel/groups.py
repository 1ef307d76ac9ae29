"""Process groups of a ``t × p × d`` grid, built as Megatron-LM's ``initialize_model_parallel``
builds them (book chapter 12).

:func:`megatron_groups` is a pure function (the rank lists); :func:`init_groups` creates this
rank's groups with ``dist.new_group``; :func:`grid_sizes` checks a grid fits a world size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

Group = Any
"""A ``torch.distributed`` process group (``None``: the default group)."""


@dataclass(frozen=True)
class ParallelGroups:
    """The rank lists of a ``t × p × d`` grid (every group, each a list of global ranks).

    Megatron's order (``initialize_model_parallel``): ``rank = pp·(t·d) + dp·t + tp`` —
    tensor groups are ``t`` consecutive ranks (one node, NVLink), data groups take every
    ``t``-th rank inside a pipeline stage's block of ``t·d`` ranks, pipeline groups every
    ``t·d``-th rank. ``embedding`` pairs a pipeline's first and last stage (the tied word
    embedding's gradient).
    """

    t: int
    p: int
    d: int
    tensor: list[list[int]]
    pipeline: list[list[int]]
    data: list[list[int]]
    embedding: list[list[int]]

    def of(self, kind: str, rank: int) -> list[int]:
        """The group of ``kind`` (tensor, pipeline, data, embedding) that holds ``rank``."""
        for ranks in getattr(self, kind):
            if rank in ranks:
                return list(ranks)
        raise ValueError(f"rank {rank} is in no {kind} group")


def megatron_groups(world_size: int, t: int, p: int = 1) -> ParallelGroups:
    """Every group of ``world_size`` ranks with tensor size ``t`` and pipeline size ``p``.

    A pure function (no processes). ``d = world_size / (t·p)``. Example (Megatron-LM's
    docstring): 16 ranks, ``t = 2``, ``p = 4`` give the tensor groups [0,1] [2,3] … [14,15],
    the data groups [0,2] [1,3] [4,6] [5,7] …, the pipeline groups [0,4,8,12] [1,5,9,13]
    [2,6,10,14] [3,7,11,15].
    """
    if t < 1 or p < 1:
        raise ValueError(f"tensor and pipeline sizes must be at least 1, got t={t}, p={p}")
    if world_size % (t * p):
        raise ValueError(f"world size {world_size} is not a multiple of t·p = {t}·{p}")
    d = world_size // (t * p)
    per_stage = t * d  # ranks in one pipeline stage
    tensor = [list(range(k * t, (k + 1) * t)) for k in range(world_size // t)]
    data = [list(range(s * per_stage + j, (s + 1) * per_stage, t))
            for s in range(p) for j in range(t)]
    pipeline = [list(range(k, world_size, per_stage)) for k in range(per_stage)]
    embedding = [[g[0], g[-1]] if len(g) > 1 else [g[0]] for g in pipeline]
    return ParallelGroups(t, p, d, tensor, pipeline, data, embedding)


def init_groups(t: int, p: int = 1) -> dict[str, Group]:
    """Create every group with ``dist.new_group`` (all ranks call it, in the same order, as
    ``new_group`` requires) and return this rank's tensor, pipeline, data groups, and its
    embedding group when ``p > 1`` and it runs the first or the last stage."""
    world, rank = dist.get_world_size(), dist.get_rank()
    grid = megatron_groups(world, t, p)
    mine: dict[str, Group] = {}
    for kind in ("tensor", "pipeline", "data", "embedding"):
        for ranks in getattr(grid, kind):
            if kind == "embedding" and len(ranks) == 1:
                continue  # p = 1: the output layer IS the embedding, nothing to sum
            group = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = group
    return mine


def grid_sizes(world_size: int, t: int, p: int = 1) -> tuple[int, int, int]:
    """``(t, p, d)`` for ``world_size`` ranks, with a one-line error when it does not fit
    (``p > 1`` trains on the pipeline runtime: :mod:`backends.megatron`)."""
    grid = megatron_groups(world_size, t, p)
    return grid.t, grid.p, grid.d
