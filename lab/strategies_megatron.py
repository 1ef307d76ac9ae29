"""Megatron-LM's grid as a strategy twin (book chapter 12): ``megatron``.

The chapter's small GPT (2 layers, hidden 32, 4 heads, vocabulary 64, sequence 16, global
batch 8) trained on a ``t × p × d`` grid of ``world = t·p·d`` processes: ``t``-way tensor
parallelism (Megatron's column- and row-parallel layers, optionally with sequence
parallelism), ``p`` pipeline stages (1F1B over ``m`` micro-batches, :mod:`backends.megatron`)
and ``d`` data-parallel replicas. The sweep is the grid itself — the knob the chapter
teaches — named as :attr:`lab.tensor_parallel.GridPoint.name` writes it: ``t2d1`` (two-way
tensor parallel), ``t1d2`` (two replicas), ``t2d1-sp`` (with sequence parallelism),
``t1p2d1m4`` (two pipeline stages, four micro-batches). A comparison at ``world`` ranks runs
the points of that world (``t·p·d = world``) and skips the others.

Per point, as ``benchmarks/tensor_parallel_accuracy.py`` does:

* **predicted** — :func:`lab.tensor_parallel.predict`: each rank's compute profile (the step
  with its collectives stood in, on ``min(world, cores)`` processes at once, in the
  measurement's own rounds) replayed on this machine's calibrated cluster
  (:func:`lab.tensor_parallel.waiting_cluster`: the calibration entry, with α taken from the
  waiting primitive — tiny ring steps between computations, never the GPT's step), the ranks
  sharing the host's cores;
* **measured** — the real :class:`backends.tensor_parallel.ParallelGPT` /
  :class:`backends.megatron.GridGPT` step on ``world`` spawned processes
  (:func:`lab.tensor_parallel.measure_rank`), the slowest rank's time per step: median, p10,
  p90 of barrier-aligned repeats of :data:`STEPS` steps back to back.

Seconds; ``bytes`` is the whole (unsharded) model's float32 parameters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

STEPS = 3
"""Training steps back to back per timed sample (the time per step), as the benchmark."""

_NAME = re.compile(r"t(\d+)(?:p(\d+))?d(\d+)(?:m(\d+))?(-sp)?")


def grid_point(name: str) -> Any:
    """The :class:`lab.tensor_parallel.GridPoint` a grid name (``t2p2d1m2-sp``) stands for."""
    from lab.tensor_parallel import GridPoint

    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"invalid grid {name!r}: like t2d1, t2d1-sp or t1p2d1m2")
    t, p, d, m, sp = match.groups()
    point = GridPoint(t=int(t), d=int(d), p=int(p or 1), microbatches=int(m or 1),
                      sequence_parallel=sp is not None)
    if point.name != name:
        raise ValueError(f"invalid grid {name!r}: write it {point.name!r}")
    return point


def _compare(world: int, points: Sequence[Any], repeats: int,
             calibration: str | Path | None) -> list[dict[str, Any]]:
    """Every point of ``world`` ranks profiled, measured (in one spawned group, interleaved
    rounds) and predicted."""
    import torch

    from backends.launch import spawn
    from backends.tensor_parallel.model import gpt_parameters
    from lab.pipeline import host_cores
    from lab.tensor_parallel import measure_rank, point_fields, predict, waiting_cluster
    from lab.units import UsageError

    grids = [grid_point(name) for name in points]
    grids = [g for g in grids if g.world == world]
    if not grids:
        raise UsageError(f"no grid of {world} ranks among {', '.join(points)}: megatron's "
                         f"points are t·p·d = world")
    cores = host_cores()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # the ranks run single-threaded, as the benchmark
        got = spawn(measure_rank, world, [point_fields(g) for g in grids], repeats, STEPS,
                    min(world, cores), True, "mean", backend="gloo", timeout=120)[0]
    finally:
        torch.set_num_threads(threads)
    cluster, described = waiting_cluster(
        world, got["exchange_s"], calibration=None if calibration is None else str(calibration))
    rows = []
    for grid, ops, measured in zip(grids, got["profiles"], got["points"], strict=True):
        rows.append(row(TWIN, world, grid.name, predict(grid, ops, cluster, cores), measured,
                        nbytes=4 * gpt_parameters(grid.config), t=grid.t, p=grid.p, d=grid.d,
                        microbatches=grid.microbatches,
                        sequence_parallel=grid.sequence_parallel, cluster=described,
                        exchange_in_chain_s=got["exchange_s"]))
    return rows


TWIN = register(StrategyTwin(
    name="megatron", chapter="12", summary="Megatron-LM: the small GPT on a t × p × d grid — "
    "tensor-parallel layers, 1F1B pipeline stages, data-parallel replicas",
    parameter="grid",
    points=("t1d2", "t2d1", "t2d1-sp", "t1p2d1m4",
            "t1d4", "t2d2", "t2d2-sp", "t4d1", "t4d1-sp", "t1p2d2m2", "t2p2d1m4"),
    quick_points=("t2d1", "t2d2"), compare=_compare, worlds=(2, 4), quick_worlds=(2,)))
