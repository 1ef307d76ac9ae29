"""Rank programs that run ONE traced step of a real twin and return every rank's spans.

:mod:`lab.timelines` spawns these (``backends.launch.spawn``) to draw a strategy twin's measured
timeline beside its predicted one; the chapters whose lab module already records a traced step
(DDP, Horovod, the pipelines, PipeDream, the parameter server, DataParallel) use that instead.
Each program runs an untraced warm-up step first — lazy set-up (allocation, the first
collective's connection) stays out of the timeline — then one step with a
:class:`~backends.trace.Tracer` on, and returns the spans of every rank as records of
:class:`simulator.core.engine.Trace` on rank 0 (``None`` elsewhere where the step has a
driver). Times from ``time.perf_counter``, s. On a GPU (:func:`backends.device.device`) the
device is synchronized before the traced step, so no warm-up kernel runs into it, and after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.device import synchronize
from backends.trace import Tracer


def megatron_step_rank(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """One step of the small GPT on the grid point ``fields``
    (:class:`backends.tensor_parallel.GridPoint`): with ``p = 1`` a
    :class:`~backends.tensor_parallel.ParallelGPT` step (``compute`` forward and backward,
    ``allreduce`` gradients, ``compute`` optimizer, :func:`backends.tensor_parallel.train_step`;
    inside them each collective of the tensor group,
    :class:`~backends.tensor_parallel.communication.TracedGroup`); with ``p > 1`` a
    :class:`~backends.megatron.GridGPT` step (the pipeline's ``F``/``B`` compute and its
    sends and receives). Every rank's spans, on every rank."""
    from backends import megatron
    from backends import tensor_parallel as tp
    from backends.tensor_parallel.communication import TracedGroup
    from backends.tensor_parallel.point import GridPoint

    point = GridPoint(**fields)
    tracer = Tracer(enabled=False)
    torch.manual_seed(0)
    step: Callable[[], Any]
    if point.p > 1:
        grid = megatron.GridRank.create(point.t, point.p)
        gpt = megatron.GridGPT(point.config, grid, point.microbatches,
                               point.sequence_parallel, tracer=tracer)
        opt = torch.optim.SGD(gpt.parameters(), lr=0.01)
        tokens, targets = tp.lm_batch(point.config, point.global_batch, seed=1)
        tokens, targets = (tp.batch_shard(tokens, point.d, grid.dp_rank),
                           tp.batch_shard(targets, point.d, grid.dp_rank))

        def step() -> Any:
            return gpt.train_step(opt, tokens, targets)
    else:
        groups = tp.init_groups(point.t)
        tensor = TracedGroup(groups["tensor"], tracer)
        model = tp.ParallelGPT(point.config, tensor, point.sequence_parallel)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        dp_rank = dist.get_rank(groups["data"])
        tokens, targets = tp.lm_batch(point.config, point.global_batch, seed=1)
        tokens, targets = (tp.batch_shard(tokens, point.d, dp_rank),
                           tp.batch_shard(targets, point.d, dp_rank))

        def step() -> Any:
            return tp.train_step(model, opt, tokens, targets, groups["data"], tracer=tracer)
    return _traced_step(step, tracer)


def _traced_step(step: Callable[[], Any], tracer: Tracer) -> list[dict[str, Any]]:
    """An untraced warm-up ``step``, then one traced from a barrier: every rank's spans."""
    step()
    synchronize()
    dist.barrier()
    tracer.enabled = True
    step()
    synchronize()
    return tracer.gather().to_records()


def rpc_split_step_rank(factories: Sequence[Callable[[], nn.Module]], in_features: int,
                        out_features: int, batch: int) -> list[dict[str, Any]] | None:
    """One training step of :class:`backends.rpc.SplitModel` (stage ``i`` built by
    ``factories[i]`` on rank ``i + 1``) on a batch of ``batch`` rows, driven by rank 0:
    the driver's spans (``rpc`` forward, ``compute`` loss, ``rpc`` backward, ``rpc``
    optimizer, :func:`backends.rpc.train_split`) and each worker's ``compute`` forward
    spans, on rank 0 (``None`` on the workers)."""
    from backends.rpc import SplitModel, init_rpc, shutdown, train_split

    init_rpc()
    try:
        if dist.get_rank() != 0:
            return None
        model = SplitModel(factories, list(range(1, len(factories) + 1)), trace=True)
        gen = torch.Generator().manual_seed(0)
        data = [(torch.randn(batch, in_features, generator=gen),
                 torch.randn(batch, out_features, generator=gen))]
        train_split(model, data)  # warm-up
        model.trace_records()  # forget the warm-up's spans
        tracer = Tracer()
        train_split(model, data, tracer=tracer)
        return tracer.trace.to_records() + model.trace_records()
    finally:
        shutdown()
