"""The synchronous pipeline schedules as strategy twins (book chapters 8–9): ``pipeline.gpipe``,
``pipeline.1f1b`` and ``pipeline.interleaved``.

The world is the number of pipeline stages, one process each, and the sweep is the number of
micro-batches ``m`` a mini-batch of 64 examples is split into — the knob of the bubble
``(p − 1)/(m + p − 1)`` (GPipe), of 1F1B's bounded activation memory, and of the interleaved
schedule's ``v``-fold smaller bubble. The model is :class:`lab.pipeline.PipelineSetup`'s
8-block MLP (width 256, hidden 1024), balanced by time on its profile (torchgpipe's
``balance_by_time``).

Each point predicts from the per-layer profile measured on ONE process at the micro-batch size
(:func:`lab.pipeline.profile`) and each stage's compute timed as the runtime runs it, alone and
with one copy per stage computing at once — no messages, no pipeline
(:func:`lab.pipeline.profile_stages_together`, the default of
``benchmarks/pipeline_accuracy.py``) — both profiled once per point and handed to the simulated
twin (:func:`lab.pipeline.predict`: :func:`simulator.pipeline.simulate.simulate_pipeline`, the
stage processes sharing the host's cores) in two tiers: **textbook**, on
:func:`simulator.host.factory.textbook_cluster` (α, B, the shared bus), and **host**, on this
machine's calibrated cluster with its measured effects (:func:`lab.pipeline.local_cluster`).
It measures the real twin (:func:`lab.pipeline.measure`:
:class:`backends.pipeline.runtime.Pipeline` on ``world`` processes, balanced by time on its own
profile as torchgpipe does, the slowest rank's step, median/p10/p90). Times are one training
step (every micro-batch forward and backward, then the update), s; ``bytes`` is the model's
parameters. Rows add the schedule, ``chunks``, ``balance`` and ``batch``; a predicted row the
bubble and each stage's peak activation bytes (of the host tier where it was predicted), a
measured row each stage's peak activation bytes and the share of the host's CPU that other
processes took meanwhile (``foreign_cpu_share``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import pipeline_timeline
from simulator.core.calibration import Calibration
from simulator.host.factory import shown_tier

CHUNKS = 2
"""Model chunks per rank of the interleaved schedule (Megatron's ``v``; at least 2)."""

PROFILE_REPEATS = 10
"""Repeats of the one-process per-layer profile."""

TOGETHER_S = 0.5
"""Seconds each stage's compute is timed with one copy per stage computing at once
(:func:`lab.pipeline.profile_stages_together`)."""


def setups(schedule: str, world: int, points: Sequence[Any]) -> list[Any]:
    """Each point's :class:`lab.pipeline.PipelineSetup`, checked: a one-line error for a world
    the model or the schedule cannot take."""
    from lab.pipeline import PipelineSetup
    from lab.units import UsageError

    name = SCHEDULES[schedule].name
    chunks = CHUNKS if schedule == "interleaved" else 1
    if world * chunks > PipelineSetup.layers:
        raise UsageError(f"{name} at world {world} needs {world * chunks} virtual "
                         f"stages; the model has {PipelineSetup.layers} blocks")
    if schedule == "interleaved":
        bad = [m for m in points if m % world]
        if bad:
            raise UsageError(f"{name} needs the {world} stages to divide the "
                             f"micro-batches: not {', '.join(map(str, bad))}")
    return [PipelineSetup(stages=world, microbatches=m, schedule=schedule, chunks=chunks)
            for m in points]


def _fields(setup: Any, layers: Sequence[Any]) -> dict[str, Any]:
    """What a balanced setup's rows say of it, predicted or measured alike."""
    return {"bytes": sum(x.parameter_bytes for x in layers), "schedule": setup.schedule,
            "chunks": setup.chunks, "balance": list(setup.balance or ()), "batch": setup.batch}


def _twin(schedule: str) -> tuple[Any, Any]:
    """The :data:`~lab.strategies.Predict` and :data:`~lab.strategies.Measure` of a schedule."""
    def predict(world: int, points: Sequence[Any], calibration: Calibration,
                models: Sequence[str]) -> list[dict[str, Any]]:
        """Profile each point once, then simulate it in each tier."""
        from lab.pipeline import local_cluster, profile, profile_stages_together
        from lab.pipeline import predict as simulate

        clusters = {model: local_cluster(world, calibration, model=model)[0]
                    for model in models}
        rows = []
        for setup in setups(schedule, world, points):
            layers = profile(setup, PROFILE_REPEATS)
            setup = setup.with_balance(layers)
            stage_times = profile_stages_together(setup, TOGETHER_S)
            tiers = {model: simulate(setup, layers, cluster=cluster, stage_times=stage_times)
                     for model, cluster in clusters.items()}
            chosen = tiers[shown_tier(tiers)]
            rows.append({"predicted": {m: r.step_time_s for m, r in tiers.items()},
                         **_fields(setup, layers), "predicted_bubble": chosen.bubble_fraction,
                         "predicted_peak_activation_bytes": chosen.peak_activation_bytes})
        return rows

    def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
        """Each point's real step, balanced by time on its own profile."""
        from lab.pipeline import host_cores, profile
        from lab.pipeline import measure as run

        rows = []
        for setup in setups(schedule, world, points):
            layers = profile(setup, PROFILE_REPEATS)
            setup = setup.with_balance(layers)
            got = run(setup, repeats, builtin=False)
            timing = got["timing"]
            rows.append({"median_s": timing["median_s"], "p10_s": timing["p10_s"],
                         "p90_s": timing["p90_s"], **_fields(setup, layers),
                         "measured_peak_activation_bytes": got["peak_activation_bytes"],
                         "foreign_cpu_share": (got["foreign_cpu_s"] or 0.0)
                         / (got["window_s"] * host_cores())})
        return rows

    return predict, measure


SUMMARIES = {
    "gpipe": ("GPipe: every micro-batch forward, then every backward, then one update",
              (1, 2, 4, 8, 16), (2,)),
    "1f1b": ("1F1B (PipeDream-Flush): warm-up forwards, then one forward one backward, "
             "flushed each step", (1, 2, 4, 8, 16), (2,)),
    "interleaved": (f"interleaved 1F1B: {CHUNKS} model chunks per stage, a smaller bubble for "
                    "more messages", (4, 8, 16), (4,)),
}



def _register(schedule: str, summary: str, points: tuple[int, ...],
              quick: tuple[int, ...]) -> StrategyTwin:
    predict, measure = _twin(schedule)
    return register(StrategyTwin(
        name=f"pipeline.{schedule}", chapter="8-9", summary=summary, parameter="microbatches",
        points=points, quick_points=quick, predict=predict, measure=measure, worlds=(2, 4),
        quick_worlds=(2,), min_world=2, max_world=4, timeline=pipeline_timeline(schedule)))


SCHEDULES = {schedule: _register(schedule, *spec) for schedule, spec in SUMMARIES.items()}
"""One twin per schedule; the interleaved one's points are multiples of 4, so that 2 or 4
stages divide them (Megatron's schedule needs it; at 3 stages it says so)."""
