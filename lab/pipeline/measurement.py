"""The real side: a setup run on real processes, its steps timed.

:func:`measure` runs the real twin (:class:`backends.pipeline.runtime.Pipeline`) on one
process per stage (the rank program :func:`backends.pipeline.measure.measure_rank`), times
steps (median, p10/p90 of the slowest rank), records one traced step and the peak activation
bytes per stage — and, for GPipe and 1F1B, times ``torch.distributed.pipelining`` on the same
split, interleaved in the same rounds. :func:`measure_sweep` does several setups in one launch.

Units: seconds, bytes.
"""

from __future__ import annotations

from typing import Any

from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_busy_s
from simulator.core.engine import Trace


def measure_sweep(setups: list[PipelineSetup], repeats: int = 10, builtin: bool = False,
                  timeout: float = 120.0) -> list[dict[str, Any]]:
    """:func:`measure` for several setups with the same number of stages, in ONE launch
    (launching costs seconds; notebooks use this)."""
    from backends.launch import spawn
    from backends.pipeline.measure import measure_sweep_rank

    stages = {s.stages for s in setups}
    if len(stages) != 1 or any(s.balance is None for s in setups):
        raise ValueError("measure_sweep needs setups of one stage count, each with a balance")
    per_rank = spawn(measure_sweep_rank, stages.pop(), setups, repeats, builtin, host_busy_s,
                     timeout=timeout)
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
    from backends.pipeline.measure import measure_rank

    if setup.balance is None:
        raise ValueError("measure needs an explicit balance (see PipelineSetup.with_balance)")
    return _combine(spawn(measure_rank, setup.stages, setup, repeats, builtin, host_busy_s,
                          timeout=timeout))
