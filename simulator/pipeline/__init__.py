"""Simulated pipeline parallelism (book chapters 8–11): GPipe, torchgpipe, PipeDream.

* :mod:`~simulator.pipeline.schedules` — the schedules as pure functions (both twins use them);
* :mod:`~simulator.pipeline.profile` — :class:`LayerProfile`, what one layer costs.
"""

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
)

__all__ = [
    "SCHEDULES",
    "Action",
    "LayerProfile",
    "WeightVersions",
    "bubble_fraction",
    "clock_cycles",
    "gpipe",
    "interleaved_1f1b",
    "one_f_one_b",
    "pipedream_2bw",
    "pipedream_async",
    "stage_profiles",
    "uniform_profile",
]
