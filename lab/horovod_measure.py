"""The real engine measured: step times and one traced step of ``backends.horovod``.

Chapter 7. Rank functions run under :func:`backends.launch.spawn` on this machine's
processes: :func:`measure_settings` times training steps of the lab's MLP under the engine at
each (fusion threshold, cycle time), with the engine's own counters
(:func:`backends.horovod.stats`); :func:`measured_timeline` records one step's spans, the main
thread's and the background thread's, which :func:`timeline` gathers into a
:class:`~simulator.core.engine.Trace` named as the simulated engine names its spans.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from lab.horovod_predict import MiB
from simulator.core.engine import Trace


def _data(widths: Sequence[int], batch: int) -> tuple[Any, Any]:
    import torch
    import torch.distributed as dist

    gen = torch.Generator().manual_seed(dist.get_rank())
    return (torch.randn(batch, widths[0], generator=gen),
            torch.randn(batch, widths[-1], generator=gen))


def _horovod_training(widths: Sequence[int], fusion_threshold_mb: float, cycle_time_ms: float,
                      timeline: bool = False) -> tuple[Any, Any]:
    """``hvd.init`` with these settings, the MLP and its ``DistributedOptimizer`` (SGD)."""
    import torch

    import backends.horovod as hvd
    from lab.models import mlp

    hvd.init(cycle_time_ms=cycle_time_ms, fusion_threshold_bytes=int(fusion_threshold_mb * MiB),
             timeline=timeline)
    model = mlp(widths, 0, torch.nn.ReLU)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    return model, opt


def measure_settings(widths: Sequence[int], batch: int,
                     points: Sequence[tuple[float, float]], repeats: int = 10,
                     rounds: int = 2, warmup: int = 3) -> list[dict[str, Any]]:
    """Rank function: the real engine's step time at each ``(fusion threshold MiB, cycle time
    ms)``. A setting needs its own engine (``init`` … ``shutdown``), so repeats are
    interleaved by rounds: each round visits every point and takes ``repeats / rounds``
    samples (``warmup`` steps first: the response cache fills in the first). A sample is one
    training step, barrier-aligned, the slowest rank's time. Also each point's
    :func:`backends.horovod.stats` per step (cycles, fused all-reduces)."""
    import torch

    import backends.horovod as hvd
    from backends.measure import Timing, measure

    x, y = _data(widths, batch)
    samples: dict[int, list[float]] = {i: [] for i in range(len(points))}
    counters: dict[int, dict[str, float]] = {}
    per_round = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for i, (threshold_mb, cycle_ms) in enumerate(points):
            model, opt = _horovod_training(widths, threshold_mb, cycle_ms)
            try:
                def step(model: Any = model, opt: Any = opt) -> None:
                    opt.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()  # type: ignore[no-untyped-call]
                    opt.step()

                for _ in range(warmup):
                    step()
                hvd.reset_stats()
                timing = measure(step, repeats=per_round, warmup=0, inner=1)
                stats = hvd.stats()
                samples[i] += list(timing.samples_s)
                steps = per_round + 1  # measure() runs one more, unrecorded, step first
                counters[i] = {"cycles_per_step": stats["cycles"] / steps,
                               "allreduces_per_step": stats["allreduces"] / steps,
                               "coordinator_rounds": stats["coordinator_rounds"]}
            finally:
                hvd.shutdown()
    return [{"fusion_threshold_mb": t, "cycle_time_ms": c,
             **Timing.from_samples(samples[i]).as_dict(), **counters[i]}
            for i, (t, c) in enumerate(points)]


def measured_timeline(widths: Sequence[int], batch: int, fusion_threshold_mb: float,
                      cycle_time_ms: float, steps: int = 4) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps, every rank: the main
    thread's (``compute`` forward, ``compute`` backward, ``wait`` synchronize, ``compute``
    optimizer, instants ``ENQUEUE``) and the background thread's (``WAIT``, ``NEGOTIATE``,
    ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE``, ``MEMCPY_OUT_FUSION_BUFFER``)."""
    import torch
    import torch.distributed as dist

    import backends.horovod as hvd
    from backends.trace import Tracer

    x, y = _data(widths, batch)
    model, opt = _horovod_training(widths, fusion_threshold_mb, cycle_time_ms, timeline=True)
    tracer = Tracer(rank=hvd.rank())
    try:
        for _ in range(steps):
            dist.barrier()
            tracer.trace.spans.clear()
            hvd.timeline(clear=True)
            start = time.perf_counter()
            opt.zero_grad()
            with tracer.span("compute", "forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            with tracer.span("compute", "backward"):
                loss.backward()  # type: ignore[no-untyped-call]
            with tracer.span("wait", "synchronize"):
                opt.synchronize()
            with tracer.span("compute", "optimizer"), opt.skip_synchronize():
                opt.step()
            end = time.perf_counter()
        background = [s for s in hvd.timeline() if s.end >= start and s.start <= end]
        mine = tracer.trace.to_records() + Trace(background).to_records()
    finally:
        hvd.shutdown()
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, mine)
    return [r for part in parts for r in part]


def timeline(world: int, widths: Sequence[int], batch: int, fusion_threshold_mb: float,
             cycle_time_ms: float) -> Trace:
    """One measured step of the real engine on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(measured_timeline, world, list(widths), batch, fusion_threshold_mb,
                    cycle_time_ms, timeout=120)[0]
    return Trace.from_records(records).shifted()
