"""The rank programs of the Megatron twin's measurements (book chapter 12), spawned one per
process by :mod:`lab.tensor_parallel` (``backends.launch.spawn``):

* :func:`measure_rank` — the real step of the small GPT on a ``t × p × d`` grid
  (:class:`~backends.tensor_parallel.ParallelGPT`, :class:`~backends.megatron.GridGPT`),
  barrier-aligned repeats, the slowest rank's seconds per step; in the same rounds the
  waiting primitive and, optionally, each point's compute profile
  (:mod:`backends.tensor_parallel.profile`);
* :func:`profile_together_rank` — the compute profiles alone, every copy at once;
* the **waiting primitive** (:func:`ring_steps`, :func:`wait_step`, :func:`fragments`): what
  one blocking wait for a tiny message costs inside a chain of computation on this host, s;
* :func:`mlp_speed_rank` — our :class:`~backends.tensor_parallel.ParallelMLP` against
  PyTorch's DTensor parallel styles (``ColwiseParallel``/``RowwiseParallel`` on a
  ``DeviceMesh``), forward + backward seconds side by side;
* :func:`probe_rank` — all-reduces alone, back to back and between computations, s.

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from backends import tensor_parallel as tp
from backends.device import device, on_device
from backends.measure import measure_many
from backends.tensor_parallel.point import GridPoint, _batch, _model
from backends.tensor_parallel.profile import (
    Conditions,
    Sampler,
    profile_ops,
    profile_stages,
    sampler,
)

WAIT_BYTES = 4096
"""Size of the messages of the waiting primitive (:func:`ring_steps`): half of an 8 KB
all-reduce, what one step of a 2-rank gloo ring moves."""
WAIT_COUNT = 16
"""Ring steps per timed call of the waiting primitive."""
FRAGMENT_MATMULS = 10
"""The compute between two ring steps of the primitive: this many 64 × 64 float32 matrix
products (~70 µs here, the size of the gaps between the small GPT's collectives)."""


def _fragment() -> Any:
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)).to(device())

    def run() -> None:
        for _ in range(FRAGMENT_MATMULS):
            a @ a

    return run


def ring_steps(nbytes: int = WAIT_BYTES, count: int = WAIT_COUNT, group: Any = None,
               compute: bool = True) -> Any:
    """The waiting primitive: a function that runs ``count`` ring steps — every rank sends
    ``nbytes`` to its left neighbour without waiting and blocks until as many arrive from its
    right (one step of gloo's ring, :func:`simulator.ddp.gloo_ring_all_reduce`) — each
    followed by a fragment of compute (:data:`FRAGMENT_MATMULS`) when ``compute``; the sends
    are waited for at the end. :func:`fragments` is the same compute without the steps.

    Timed with every rank at once, ``(steps − fragments) / count`` (means) is what one
    blocking wait for a tiny message costs *inside a chain of computation* on this host
    (see :func:`waiting_cluster`)."""
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    ranks = [dist.get_global_rank(group, r) for r in range(world)] if group is not None \
        else list(range(world))
    left, right = ranks[(rank - 1) % world], ranks[(rank + 1) % world]
    out = torch.zeros(nbytes // 4, device=device())
    into = [torch.zeros(nbytes // 4, device=device()) for _ in range(count)]
    fragment = _fragment()

    def run() -> None:
        sends = []
        for i in range(count):
            if world > 1:
                recv = dist.irecv(into[i], right, group=group, tag=i)
                sends.append(dist.isend(out, left, group=group, tag=i))
                assert recv is not None
                recv.wait()
            if compute:
                fragment()
        for send in sends:
            assert send is not None
            send.wait()

    return run


def wait_step(nbytes: int = WAIT_BYTES, group: Any = None) -> Any:
    """One blocking ring step of ``nbytes`` on ``group`` with no compute (:func:`ring_steps`
    with ``count = 1``): the wait a profile puts before each piece of compute it times
    (:func:`profile_together_rank`); every process of the group must call it alike."""
    return ring_steps(nbytes, 1, group, compute=False)


def fragments(count: int = WAIT_COUNT) -> Any:
    """``count`` compute fragments of :func:`ring_steps`, no messages."""
    fragment = _fragment()
    return lambda: [fragment() for _ in range(count)]


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
        dp_rank = dist.get_rank(groups["data"])
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
    def slowest(pieces: list[float]) -> list[float]:
        t = torch.tensor(pieces, dtype=torch.float64, device=device())
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

    torch.set_num_threads(1)
    t = dist.get_world_size()
    torch.manual_seed(0)
    mlp = nn.Sequential()
    mlp.fc1 = nn.Linear(hidden, 4 * hidden)
    mlp.act = nn.GELU()
    mlp.fc2 = nn.Linear(4 * hidden, hidden)
    theirs = parallelize_module(on_device(mlp), init_device_mesh(device().type, (t,)),
                                {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    ours = on_device(tp.ParallelMLP(hidden))
    x = torch.randn(tokens, hidden, device=device())

    def run(module: nn.Module) -> None:
        xi = x.clone().requires_grad_()
        module(xi).sum().backward()

    ours_t, theirs_t = measure_many([lambda: run(ours), lambda: run(theirs)], repeats=repeats,
                                    warmup=3)
    return {"hidden": hidden, "tokens": tokens, "t": t, "ours": ours_t.as_dict(),
            "dtensor": theirs_t.as_dict(), "ratio": ours_t.median_s / theirs_t.median_s}


def probe_rank(nbytes: int, compute_s: float, count: int, repeats: int) -> dict[str, float]:
    """Rank function: median time of one all-reduce of ``nbytes`` alone (right after a
    barrier), of ``count`` of them back to back, and of ``count`` × (a busy loop of
    ``compute_s``, then the all-reduce) — :func:`lab.tensor_parallel.probe_ops` run for
    real, s."""
    torch.set_num_threads(1)
    x = torch.zeros(nbytes // 4, device=device())

    def alone() -> None:
        dist.all_reduce(x)

    def interleaved() -> None:
        for _ in range(count):
            end = time.perf_counter() + compute_s
            while time.perf_counter() < end:
                pass
            dist.all_reduce(x)

    def back_to_back() -> None:
        for _ in range(count):
            dist.all_reduce(x)

    a, b, c = measure_many([alone, back_to_back, interleaved], repeats=repeats, warmup=3,
                           inner=1)
    return {"alone_s": a.median_s, "back_to_back_s": b.median_s, "interleaved_s": c.median_s}
