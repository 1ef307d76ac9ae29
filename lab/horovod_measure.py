"""The real engine measured: step times and one traced step of ``backends.horovod``.

Chapter 7. The rank code lives in :mod:`backends.horovod.measure`; these are its lab entries,
with the lab's MLP (:func:`lab.ddp.profiling.build_mlp`) as the model:
:func:`measure_settings` times training steps under the engine at each (fusion threshold, cycle
time), with the engine's own counters (:func:`backends.horovod.stats`);
:func:`measured_timeline` records one step's spans, the main thread's and the background
thread's, which :func:`timeline` gathers into a :class:`~simulator.core.engine.Trace` named as
the simulated engine names its spans.

Units: seconds; fusion thresholds in MiB, cycle times in ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends.horovod import measure as hvd_measure
from lab.ddp.profiling import build_mlp
from simulator.core.engine import Trace


def measure_settings(widths: Sequence[int], batch: int,
                     points: Sequence[tuple[float, float]], repeats: int = 10,
                     rounds: int = 2, warmup: int = 3) -> list[dict[str, Any]]:
    """Rank function: the real engine's step time at each ``(fusion threshold MiB, cycle time
    ms)``, repeats interleaved by rounds, and each point's engine counters per step
    (:func:`backends.horovod.measure.measure_settings`)."""
    return hvd_measure.measure_settings(build_mlp, widths, batch, points, repeats, rounds,
                                        warmup)


def measured_timeline(widths: Sequence[int], batch: int, fusion_threshold_mb: float,
                      cycle_time_ms: float, steps: int = 4) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps, every rank, the main
    thread's and the background thread's (:func:`backends.horovod.measure.measured_timeline`).
    """
    return hvd_measure.measured_timeline(build_mlp, widths, batch, fusion_threshold_mb,
                                         cycle_time_ms, steps)


def timeline(world: int, widths: Sequence[int], batch: int, fusion_threshold_mb: float,
             cycle_time_ms: float) -> Trace:
    """One measured step of the real engine on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(hvd_measure.measured_timeline, world, build_mlp, list(widths), batch,
                    fusion_threshold_mb, cycle_time_ms, timeout=120)[0]
    return Trace.from_records(records).shifted()
