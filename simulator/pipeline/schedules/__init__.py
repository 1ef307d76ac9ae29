"""Pipeline schedules as pure functions: which rank runs which micro-batch, in what order.

A pipeline splits a model into ``stages`` consecutive pieces, one per rank, and a mini-batch
into ``microbatches`` micro-batches. A *schedule* is, for each rank, the ordered list of the
:class:`Action` s it runs: ``F`` (forward) or ``B`` (backward) of one micro-batch on one model
chunk. Both twins use these lists — the simulator times them on a cluster model, the real
runtime (:mod:`backends.pipeline`) executes them — so a schedule is written once, here, with no
torch and no time in it.

Dependencies every schedule must honour (stage = virtual stage ``chunk · stages + rank``):

* ``F(i)`` on stage s after ``F(i)`` on stage s−1 (its input is that stage's output);
* ``B(i)`` on stage s after ``B(i)`` on stage s+1 (its output gradient) and after ``F(i)`` on s.

:func:`timeline` places a schedule in time under exactly these rules (zero communication cost)
and :func:`draw` prints it as a table, one row per rank, one column per time unit. The tables in
the docstrings of the modules below are that output, and the tests check them literally.

Sources: GPipe (Huang et al., NeurIPS 2019), torchgpipe (Kim et al. 2020, §3.2 ``clock_cycles``),
PipeDream (Narayanan et al., SOSP 2019: 1F1B, weight stashing, vertical sync), PipeDream-2BW and
PipeDream-Flush (Narayanan et al., ICML 2021), Megatron-LM interleaved 1F1B (Narayanan et al.,
SC 2021, §2.2). Bubble formulas: ``../shared/REFERENCES.md`` "Pipeline parallel".

Read in this order:

* :mod:`~simulator.pipeline.schedules.action` — :class:`Action` and ``Schedule``;
* :mod:`~simulator.pipeline.schedules.synchronous` — GPipe, 1F1B, interleaved 1F1B,
  :data:`SCHEDULES` and torchgpipe's ``clock_cycles``;
* :mod:`~simulator.pipeline.schedules.critical_path` — :func:`timeline`, :func:`draw`,
  :func:`makespan`, :func:`idle_fraction`, :func:`in_flight`;
* :mod:`~simulator.pipeline.schedules.bubble` — :func:`bubble_fraction`, :func:`pipeline_time`;
* :mod:`~simulator.pipeline.schedules.asynchronous` — PipeDream's weight versions
  (:func:`pipedream_async`, :func:`pipedream_2bw`, :func:`draw_versions`).
"""

from simulator.pipeline.schedules.action import Action, Schedule
from simulator.pipeline.schedules.asynchronous import (
    WeightVersions,
    draw_versions,
    pipedream_2bw,
    pipedream_async,
)
from simulator.pipeline.schedules.bubble import bubble_fraction, pipeline_time
from simulator.pipeline.schedules.critical_path import (
    Span,
    draw,
    idle_fraction,
    in_flight,
    makespan,
    timeline,
)
from simulator.pipeline.schedules.synchronous import (
    SCHEDULES,
    clock_cycles,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
)

__all__ = [
    "SCHEDULES",
    "Action",
    "Schedule",
    "Span",
    "WeightVersions",
    "bubble_fraction",
    "clock_cycles",
    "draw",
    "draw_versions",
    "gpipe",
    "idle_fraction",
    "in_flight",
    "interleaved_1f1b",
    "makespan",
    "one_f_one_b",
    "pipedream_2bw",
    "pipedream_async",
    "pipeline_time",
    "timeline",
]
