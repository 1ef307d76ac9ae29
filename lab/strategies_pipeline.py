"""The synchronous pipeline schedules as strategy twins (book chapters 8–9): ``pipeline.gpipe``,
``pipeline.1f1b`` and ``pipeline.interleaved``.

The world is the number of pipeline stages, one process each, and the sweep is the number of
micro-batches ``m`` a mini-batch of 64 examples is split into — the knob of the bubble
``(p − 1)/(m + p − 1)`` (GPipe), of 1F1B's bounded activation memory, and of the interleaved
schedule's ``v``-fold smaller bubble. The model is :class:`lab.pipeline.PipelineSetup`'s
8-block MLP (width 256, hidden 1024), balanced by time on its profile (torchgpipe's
``balance_by_time``).

Each point is :func:`lab.pipeline.side_by_side`: the per-layer profile measured on ONE process
at the micro-batch size (:func:`lab.pipeline.profile`) and each stage's compute timed as the
runtime runs it, alone and with one copy per stage computing at once — no messages, no
pipeline (:func:`lab.pipeline.profile_stages_together`, the default of
``benchmarks/pipeline_accuracy.py``) — handed to the simulated twin
(:func:`lab.pipeline.predict`: :func:`simulator.pipeline.simulate.simulate_pipeline` on this
machine's calibrated cluster, the stage processes sharing the host's cores), beside the real
twin (:func:`lab.pipeline.measure`: :class:`backends.pipeline.runtime.Pipeline` on ``world``
processes, the slowest rank's step, median/p10/p90). Times are one training step (every
micro-batch forward and backward, then the update), s; ``bytes`` is the model's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

CHUNKS = 2
"""Model chunks per rank of the interleaved schedule (Megatron's ``v``; at least 2)."""

PROFILE_REPEATS = 10
"""Repeats of the one-process per-layer profile."""

TOGETHER_S = 0.5
"""Seconds each stage's compute is timed with one copy per stage computing at once
(:func:`lab.pipeline.profile_stages_together`)."""


def _comparison(schedule: str) -> Any:
    def compare(world: int, points: Sequence[Any], repeats: int,
                calibration: str | Path | None) -> list[dict[str, Any]]:
        from lab.pipeline import PipelineSetup, profile, profile_stages_together, side_by_side
        from lab.units import UsageError

        twin = SCHEDULES[schedule]
        chunks = CHUNKS if schedule == "interleaved" else 1
        if world * chunks > PipelineSetup.layers:
            raise UsageError(f"{twin.name} at world {world} needs {world * chunks} virtual "
                             f"stages; the model has {PipelineSetup.layers} blocks")
        if schedule == "interleaved":
            bad = [m for m in points if m % world]
            if bad:
                raise UsageError(f"{twin.name} needs the {world} stages to divide the "
                                 f"micro-batches: not {', '.join(map(str, bad))}")
        rows = []
        for m in points:
            setup = PipelineSetup(stages=world, microbatches=m, schedule=schedule,
                                  chunks=chunks)
            layers = profile(setup, PROFILE_REPEATS)
            stage_times = profile_stages_together(setup.with_balance(layers), TOGETHER_S)
            out = side_by_side(setup, repeats, calibration=calibration, builtin=False,
                               layer_profile=layers, stage_times=stage_times)
            r = out["record"]
            rows.append(row(twin, world, m, r["predicted_s"],
                            {"median_s": r["measured_median_s"],
                             "p10_s": r["measured_p10_s"], "p90_s": r["measured_p90_s"]},
                            nbytes=sum(x.parameter_bytes for x in out["profile"]),
                            schedule=schedule, chunks=chunks, balance=r["balance"],
                            batch=r["batch"], predicted_bubble=r["predicted_bubble"],
                            predicted_peak_activation_bytes=r[
                                "predicted_peak_activation_bytes"],
                            measured_peak_activation_bytes=r["measured_peak_activation_bytes"],
                            foreign_cpu_share=r["foreign_cpu_share"]))
        return rows

    return compare


SUMMARIES = {
    "gpipe": ("GPipe: every micro-batch forward, then every backward, then one update",
              (1, 2, 4, 8, 16), (2,)),
    "1f1b": ("1F1B (PipeDream-Flush): warm-up forwards, then one forward one backward, "
             "flushed each step", (1, 2, 4, 8, 16), (2,)),
    "interleaved": (f"interleaved 1F1B: {CHUNKS} model chunks per stage, a smaller bubble for "
                    "more messages", (4, 8, 16), (4,)),
}

SCHEDULES = {schedule: register(StrategyTwin(
    name=f"pipeline.{schedule}", chapter="8-9", summary=summary, parameter="microbatches",
    points=points, quick_points=quick, compare=_comparison(schedule), worlds=(2, 4),
    quick_worlds=(2,), min_world=2, max_world=4))
    for schedule, (summary, points, quick) in SUMMARIES.items()}
"""One twin per schedule; the interleaved one's points are multiples of 4, so that 2 or 4
stages divide them (Megatron's schedule needs it; at 3 stages it says so)."""
