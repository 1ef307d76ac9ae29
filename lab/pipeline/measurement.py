"""The real side: rank functions that run a setup on real processes and time its steps.

:func:`measure` runs the real twin (:class:`backends.pipeline.runtime.Pipeline`), times
steps (median, p10/p90 of the slowest rank), records one traced step and the peak activation
bytes per stage — and, for GPipe and 1F1B, times ``torch.distributed.pipelining`` on the same
split, interleaved in the same rounds.

Units: seconds, bytes.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_busy_s
from simulator.core.engine import Trace


def measure_rank(setup_fields: dict[str, Any], repeats: int, builtin: bool) -> dict[str, Any]:
    """Rank function: time ``repeats`` steps of our pipeline (and PyTorch's, interleaved),
    then one traced step; return timings, the peak activation bytes and the trace."""
    import torch
    import torch.distributed as dist

    from backends.measure import measure_many
    from backends.pipeline.builtin import BuiltinPipeline, supported
    from backends.pipeline.partition import partition
    from backends.pipeline.runtime import Pipeline
    from backends.trace import Tracer

    setup = PipelineSetup(**setup_fields)
    assert setup.balance is not None
    model, x, t = setup.build()
    tracer = Tracer(enabled=False)
    pipe = Pipeline(model, setup.balance, setup.microbatches, setup.schedule, setup.chunks,
                    setup.checkpoint, tracer=tracer)
    first, last = 0 in pipe.modules, pipe.last in pipe.modules
    inputs, target = (x if first else None), (t if last else None)
    steps = [lambda: pipe.step(inputs, target)]
    use_builtin = (builtin and setup.chunks == 1
                   and supported(setup.schedule, setup.stages, setup.microbatches))
    if use_builtin:
        twin_model, _, _ = setup.build()
        rank = dist.get_rank()
        ref = BuiltinPipeline(partition(twin_model, setup.balance)[rank], rank, setup.stages,
                              setup.microbatches, setup.schedule)
        steps.append(lambda: ref.step(inputs, target))
    busy_before, cpu_before, wall = host_busy_s(), time.process_time(), time.perf_counter()
    timings = measure_many(steps, repeats=repeats, warmup=2, inner=1)
    own = torch.tensor([time.process_time() - cpu_before], dtype=torch.float64)
    dist.all_reduce(own)  # CPU seconds all ranks spent, every thread counted
    busy, wall = host_busy_s() - busy_before, time.perf_counter() - wall
    tracer.enabled = True
    tracer.trace.spans.clear()
    dist.barrier()
    loss = pipe.step(inputs, target)
    return {"timing": timings[0].as_dict(),
            "builtin": timings[1].as_dict() if use_builtin else None,
            "peak_activation_bytes": pipe.peak_activation_bytes, "loss": loss,
            "foreign_cpu_s": max(busy - float(own), 0.0) if busy == busy else None,
            "window_s": wall,
            "trace": tracer.gather().to_records()}


def measure_sweep_rank(setups: list[dict[str, Any]], repeats: int,
                       builtin: bool) -> list[dict[str, Any]]:
    """Rank function: :func:`measure_rank` for several setups of one stage count in turn."""
    return [measure_rank(fields, repeats, builtin) for fields in setups]


def measure_sweep(setups: list[PipelineSetup], repeats: int = 10, builtin: bool = False,
                  timeout: float = 120.0) -> list[dict[str, Any]]:
    """:func:`measure` for several setups with the same number of stages, in ONE launch
    (launching costs seconds; notebooks use this)."""
    from backends.launch import spawn

    stages = {s.stages for s in setups}
    if len(stages) != 1 or any(s.balance is None for s in setups):
        raise ValueError("measure_sweep needs setups of one stage count, each with a balance")
    per_rank = spawn(measure_sweep_rank, stages.pop(), [asdict(s) for s in setups], repeats,
                     builtin, timeout=timeout)
    return [_combine([r[k] for r in per_rank]) for k in range(len(setups))]


def _combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One setup's result from every rank's: rank 0's timings and trace, every peak."""
    head = results[0]
    return {"timing": head["timing"], "builtin": head["builtin"],
            "peak_activation_bytes": [r["peak_activation_bytes"] for r in results],
            "loss": results[-1]["loss"], "foreign_cpu_s": head["foreign_cpu_s"],
            "window_s": head["window_s"],
            "trace": Trace.from_records(head["trace"]).shifted()}


def measure(setup: PipelineSetup, repeats: int = 10, builtin: bool = True,
            timeout: float = 120.0) -> dict[str, Any]:
    """Run ``setup`` for real on ``setup.stages`` processes (``balance`` must be set)."""
    from backends.launch import spawn

    if setup.balance is None:
        raise ValueError("measure needs an explicit balance (see PipelineSetup.with_balance)")
    return _combine(spawn(measure_rank, setup.stages, asdict(setup), repeats, builtin,
                          timeout=timeout))
