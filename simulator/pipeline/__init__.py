"""Simulated pipeline parallelism (book chapters 8–11): GPipe, torchgpipe, PipeDream.

Read in this order:

* :mod:`~simulator.pipeline.schedules` — the schedules as pure functions (both twins use
  them): GPipe, 1F1B, interleaved 1F1B, ``clock_cycles``, PipeDream's weight versions, 2BW,
  the bubble formulas and :func:`~simulator.pipeline.schedules.timeline` (critical path);
* :mod:`~simulator.pipeline.profile` — :class:`LayerProfile`, what one layer costs;
* :mod:`~simulator.pipeline.simulate` — :func:`simulate_pipeline`, the simulated twin on a
  cluster model (communication, checkpointing, activation and weight memory);
* :mod:`~simulator.pipeline.balance` — torchgpipe's balance by time and by size;
* :mod:`~simulator.pipeline.planner` — PipeDream's planner (stages and replication by DP).
"""

from simulator.pipeline.balance import balance_by_size, balance_by_time, balance_cost
from simulator.pipeline.planner import PipeDreamPlan, PlannedStage, plan_pipedream, plan_time
from simulator.pipeline.profile import LayerProfile, stage_profiles, uniform_profile
from simulator.pipeline.schedules import (
    SCHEDULES,
    Action,
    WeightVersions,
    bubble_fraction,
    clock_cycles,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    pipedream_2bw,
    pipedream_async,
    pipeline_time,
    timeline,
)
from simulator.pipeline.simulate import (
    PipelineResult,
    StageCost,
    gpipe_time,
    simulate_pipeline,
    stage_costs,
)

__all__ = [
    "SCHEDULES",
    "Action",
    "LayerProfile",
    "PipeDreamPlan",
    "PipelineResult",
    "PlannedStage",
    "StageCost",
    "WeightVersions",
    "balance_by_size",
    "balance_by_time",
    "balance_cost",
    "bubble_fraction",
    "clock_cycles",
    "gpipe",
    "gpipe_time",
    "interleaved_1f1b",
    "one_f_one_b",
    "pipedream_2bw",
    "pipedream_async",
    "pipeline_time",
    "plan_pipedream",
    "plan_time",
    "simulate_pipeline",
    "stage_costs",
    "stage_profiles",
    "timeline",
    "uniform_profile",
]
