"""The real side: rank functions (spawned on processes) that time the small GPT's real step
(:func:`measure_rank`), profile it with every copy at once (:func:`profile_together_rank`), and
time our :class:`~backends.tensor_parallel.ParallelMLP` against PyTorch's
(:func:`mlp_speed_rank`)."""

from __future__ import annotations

import statistics
from typing import Any

import torch

from backends import tensor_parallel as tp
from lab.tensor_parallel.point import GridPoint, _batch, _model
from lab.tensor_parallel.profile import Conditions, Sampler, profile_ops, profile_stages, sampler
from lab.tensor_parallel.waiting import WAIT_COUNT, fragments, ring_steps, wait_step


def profile_together_rank(points: list[dict[str, Any]], repeats: int,
                          after_wait: bool = True, slowest: bool = False,
                          statistic: str = "median") -> list[Any]:
    """Rank function: every point's profile (:func:`profile_ops` or :func:`profile_stages`),
    with every spawned copy profiling the same point at the same time (a barrier before
    each). Spawned on ``min(world, cores)`` processes, it is the compute profile of a rank
    whose neighbours compute beside it on the other cores — sharing caches and memory
    bandwidth, as the real ranks do — without time-slicing one core (the simulator's
    :class:`~simulator.core.cores.CorePool` models that).

    ``after_wait`` (default): every stand-in collective, and the start of every timed run,
    is one blocking ring step of a tiny message among the profiling copies
    (:func:`wait_step`) — the compute is timed as in a real step, each piece right after the
    thread slept in a wait. On this VM that matters: a layer's forward right after a 2 ms
    blocking wait runs ~1.5–1.8× its time in a warm loop (dispatcher-heavy code refetched
    after the core idled; a matrix-product loop is not slowed — see the note of issue 9).
    ``slowest``: each piece's time is the largest over the copies (:class:`Conditions`);
    ``statistic``: ``median`` or ``mean`` over the repeats."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    together = dist.get_world_size() > 1
    conditions = Conditions(wait_step() if after_wait and together else None,
                            _slowest_over(None) if slowest and together else None, statistic)
    out = []
    for fields in points:
        point = GridPoint(**fields)
        dist.barrier()
        out.append(profile_ops(point, repeats, conditions=conditions) if point.p == 1
                   else profile_stages(point, repeats, conditions=conditions))
    return out


def measure_rank(points: list[dict[str, Any]], repeats: int, per_sample: int = 1,
                 profile_copies: int = 0, slowest: bool = True, statistic: str = "mean"
                 ) -> dict[str, Any]:
    """Rank function: for each grid point, the real step's timing (slowest rank, median of
    barrier-aligned repeats of ``per_sample`` steps back to back, per step; the points'
    repeats interleaved), and in the same rounds the waiting primitive (:func:`ring_steps`,
    :func:`fragments`): ``{"points": [...], "exchange_s": mean seconds a ring step adds to a
    chain of compute, "fragment_s": one fragment's mean, "exchange_back_to_back_s": a ring
    step's mean without compute}``.

    ``profile_copies > 0``: also each point's compute profile, in the same rounds, on the
    first ``profile_copies`` ranks at once (the others idle meanwhile), each piece right
    after a blocking ring step among them (:func:`wait_step`), the slowest copy's time
    (``slowest``), ``statistic`` over the samples — the profile of
    :func:`profile_together_rank`, taken under the same conditions of the host as the steps
    it predicts (on this VM they drift from minute to minute). Under ``"profiles"``: one
    entry per point (:func:`profile_ops` / :func:`profile_stages` results)."""
    import torch.distributed as dist

    from backends.measure import measure_many

    torch.set_num_threads(1)
    samplers: list[Sampler] = []
    profiling: list[Any] = []
    if profile_copies > 0:
        copies = min(profile_copies, dist.get_world_size())
        team = dist.new_group(list(range(copies)))  # every rank calls new_group
        if dist.get_rank() < copies:
            conditions = Conditions(
                wait_step(group=team) if copies > 1 else None,
                _slowest_over(team) if slowest and copies > 1 else None, statistic)
            samplers = [sampler(GridPoint(**fields), conditions) for fields in points]
            profiling = [timed.sample for timed in samplers]
        else:
            profiling = [_idle for _ in points]
    steps = []
    for fields in points:
        point = GridPoint(**fields)
        if point.p > 1:
            steps.append(_grid_step(point))
            continue
        groups = tp.init_groups(point.t)
        model, opt = _model(point, groups["tensor"])
        dp_rank = torch.distributed.get_rank(groups["data"])
        tokens, targets = _batch(point, dp_rank)

        def step(model: tp.ParallelGPT = model, opt: torch.optim.Optimizer = opt,
                 tokens: torch.Tensor = tokens, targets: torch.Tensor = targets,
                 data: Any = groups["data"]) -> float:
            return tp.train_step(model, opt, tokens, targets, data)

        steps.append(step)
    warmup = 3
    timings = measure_many([*steps, ring_steps(), fragments(), ring_steps(compute=False),
                            *profiling], repeats=repeats, warmup=warmup, inner=per_sample)
    chained, compute, bare = (statistics.mean(t.samples_s) / WAIT_COUNT
                              for t in timings[len(steps):len(steps) + 3])
    out = {"points": [{**fields, **t.as_dict()}
                      for fields, t in zip(points, timings[:len(steps)], strict=True)],
           "exchange_s": max(chained - compute, 0.0), "fragment_s": compute,
           "exchange_back_to_back_s": bare}
    if samplers:
        out["profiles"] = [timed.result(warmup) for timed in samplers]
    return out


def _idle() -> None:
    """What a rank that does not profile runs while the others do."""


def _slowest_over(group: Any) -> Any:
    """:attr:`Conditions.slowest` over the processes of ``group``."""
    import torch.distributed as dist

    def slowest(pieces: list[float]) -> list[float]:
        t = torch.tensor(pieces, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return [float(v) for v in t]

    return slowest


def _grid_step(point: GridPoint) -> Any:
    """This rank's training step of a ``p > 1`` point (:class:`backends.megatron.GridGPT`)."""
    from backends import megatron

    grid = megatron.GridRank.create(point.t, point.p)
    torch.manual_seed(0)
    trained = megatron.GridGPT(point.config, grid, point.microbatches, point.sequence_parallel)
    opt = torch.optim.SGD(trained.parameters(), lr=0.01)
    tokens, targets = _batch(point, grid.dp_rank)
    return lambda: trained.train_step(opt, tokens, targets)


def mlp_speed_rank(hidden: int, tokens: int, repeats: int) -> dict[str, Any]:
    """Rank function: forward + backward of our :class:`~backends.tensor_parallel.ParallelMLP`
    and of PyTorch's ``parallelize_module`` (ColwiseParallel/RowwiseParallel) on the same
    weights and input, timed side by side (interleaved repeats)."""
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    from backends.measure import measure_many

    torch.set_num_threads(1)
    t = torch.distributed.get_world_size()
    torch.manual_seed(0)
    mlp = nn.Sequential()
    mlp.fc1 = nn.Linear(hidden, 4 * hidden)
    mlp.act = nn.GELU()
    mlp.fc2 = nn.Linear(4 * hidden, hidden)
    theirs = parallelize_module(mlp, init_device_mesh("cpu", (t,)),
                                {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    ours = tp.ParallelMLP(hidden)
    x = torch.randn(tokens, hidden)

    def run(module: nn.Module) -> None:
        xi = x.clone().requires_grad_()
        module(xi).sum().backward()

    ours_t, theirs_t = measure_many([lambda: run(ours), lambda: run(theirs)], repeats=repeats,
                                    warmup=3)
    return {"hidden": hidden, "tokens": tokens, "t": t, "ours": ours_t.as_dict(),
            "dtensor": theirs_t.as_dict(), "ratio": ours_t.median_s / theirs_t.median_s}
