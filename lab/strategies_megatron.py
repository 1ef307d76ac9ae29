"""Megatron-LM's grid as a strategy twin (book chapter 12): ``megatron``.

The chapter's small GPT (2 layers, hidden 32, 4 heads, vocabulary 64, sequence 16, global
batch 8) trained on a ``t × p × d`` grid of ``world = t·p·d`` processes: ``t``-way tensor
parallelism (Megatron's column- and row-parallel layers, optionally with sequence
parallelism), ``p`` pipeline stages (1F1B over ``m`` micro-batches, :mod:`backends.megatron`)
and ``d`` data-parallel replicas. The sweep is the grid itself — the knob the chapter
teaches — named as :attr:`lab.tensor_parallel.GridPoint.name` writes it: ``t2d1`` (two-way
tensor parallel), ``t1d2`` (two replicas), ``t2d1-sp`` (with sequence parallelism),
``t1p2d1m4`` (two pipeline stages, four micro-batches). At ``world`` ranks the twin runs the
points of that world (``t·p·d = world``, :func:`at_world`) and skips the others.

Per point, as ``benchmarks/tensor_parallel_accuracy.py`` does:

* **predicted** — :func:`lab.tensor_parallel.predict`: each rank's compute profile (the step
  with its collectives stood in, on ``min(world, cores)`` processes at once, taken in the
  rounds of :func:`lab.tensor_parallel.measure_rank` beside the real steps, so that it sees
  the host as a step does; those steps' times are not read) replayed on a cluster of the
  chosen tier, the ranks sharing the host's cores: **textbook**,
  :func:`simulator.host.factory.textbook_cluster` (the ping-pong's α and B, the shared bus);
  **host**, this machine's calibrated cluster with α taken from the waiting primitive — tiny
  ring steps between computations, never the GPT's step
  (:func:`lab.tensor_parallel.waiting_cluster`). The row adds the host cluster's description
  (``cluster``) and the waiting primitive's time (``exchange_in_chain_s``, s);
* **measured** — the real :class:`backends.tensor_parallel.ParallelGPT` /
  :class:`backends.megatron.GridGPT` step on ``world`` spawned processes
  (:func:`lab.tensor_parallel.measure_rank`), the slowest rank's time per step: median, p10,
  p90 of barrier-aligned repeats of :data:`STEPS` steps back to back.

Rows add the grid (``t``, ``p``, ``d``, ``microbatches``, ``sequence_parallel``). Seconds;
``bytes`` is the whole (unsharded) model's float32 parameters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import megatron_timeline
from simulator.core.calibration import Calibration

STEPS = 3
"""Training steps back to back per timed sample (the time per step), as the benchmark."""

PROFILE_REPEATS = 5
"""Rounds of the compute profile and of the waiting primitive a prediction takes."""

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


def at_world(world: int, points: Sequence[Any]) -> list[Any]:
    """The grids of ``world`` ranks among ``points`` (the twin's ``select``); a one-line
    error if there is none."""
    from lab.units import UsageError

    names = [name for name in points if grid_point(name).world == world]
    if not names:
        raise UsageError(f"no grid of {world} ranks among {', '.join(points)}: megatron's "
                         f"points are t·p·d = world")
    return names


def _fields(grid: Any) -> dict[str, Any]:
    """What a row says of its grid, predicted or measured alike."""
    from backends.tensor_parallel.model import gpt_parameters

    return {"bytes": 4 * gpt_parameters(grid.config), "t": grid.t, "p": grid.p, "d": grid.d,
            "microbatches": grid.microbatches, "sequence_parallel": grid.sequence_parallel}


def launch_grids(world: int, grids: Sequence[Any], repeats: int, profile: bool) -> dict[str, Any]:
    """:func:`lab.tensor_parallel.measure_rank` on ``world`` single-threaded processes (as the
    benchmark), with each grid's compute profile on ``min(world, cores)`` of them if
    ``profile``: rank 0's result."""
    import torch

    from backends.launch import spawn
    from lab.pipeline import host_cores
    from lab.tensor_parallel import measure_rank, point_fields

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        return dict(spawn(measure_rank, world, [point_fields(g) for g in grids], repeats, STEPS,
                          min(world, host_cores()) if profile else 0, True, "mean",
                          backend="gloo", timeout=120)[0])
    finally:
        torch.set_num_threads(threads)


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """Profile every grid of ``world`` ranks and the waiting primitive once, then replay each
    grid's profile in each tier."""
    from lab.pipeline import host_cores
    from lab.tensor_parallel import predict, waiting_cluster

    grids = [grid_point(name) for name in points]
    got = launch_grids(world, grids, PROFILE_REPEATS, profile=True)
    tiers = {model: waiting_cluster(world, got["exchange_s"], calibration=calibration,
                                    model=model) for model in ("host", *models)}
    described = tiers["host"][1]  # the host tier's α, whichever tiers are predicted
    clusters = {model: tiers[model][0] for model in models}
    return [{"predicted": {model: predict(grid, ops, cluster, host_cores())
                           for model, cluster in clusters.items()},
             **_fields(grid), "cluster": described, "exchange_in_chain_s": got["exchange_s"]}
            for grid, ops in zip(grids, got["profiles"], strict=True)]


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Every grid of ``world`` ranks in one spawned group, rounds interleaved."""
    grids = [grid_point(name) for name in points]
    got = launch_grids(world, grids, repeats, profile=False)
    return [{"median_s": m["median_s"], "p10_s": m["p10_s"], "p90_s": m["p90_s"],
             **_fields(grid)} for grid, m in zip(grids, got["points"], strict=True)]


TWIN = register(StrategyTwin(
    name="megatron", chapter="12", summary="Megatron-LM: the small GPT on a t × p × d grid — "
    "tensor-parallel layers, 1F1B pipeline stages, data-parallel replicas",
    parameter="grid",
    points=("t1d2", "t2d1", "t2d1-sp", "t1p2d1m4",
            "t1d4", "t2d2", "t2d2-sp", "t4d1", "t4d1-sp", "t1p2d2m2", "t2p2d1m4"),
    quick_points=("t2d1", "t2d2"), predict=_predict, measure=_measure, worlds=(2, 4),
    quick_worlds=(2,), select=at_world, timeline=megatron_timeline))
