"""DataParallel as a strategy twin (book chapter 4): ``data_parallel``.

The world is the number of replicas — threads of one process, as in PyTorch's DataParallel —
and the sweep is the batch the replicas split. Each point predicts the iteration
(:func:`lab.data_parallel.predict_step`, from one-thread primitives) and measures the real
:class:`backends.data_parallel.DataParallel` iteration (:func:`lab.data_parallel.measure_step`).

Calibration-free (``calibrated=False``): the replicas are threads of one process, so no
message crosses the calibrated network — the copies, sums and compute are primitives measured
here on one thread (:func:`lab.data_parallel.measure_primitives`). The textbook and host tiers
therefore give the same prediction: there is no host effect of the network to add.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import data_parallel_timeline
from simulator.core.calibration import Calibration

WIDTHS = (512, 2048, 2048, 10)
"""The MLP (5.3 M parameters, as :data:`lab.data_parallel.DEFAULT_WIDTHS`)."""

PRIMITIVE_REPEATS = 5
"""Repeats of each one-thread primitive (:func:`lab.data_parallel.measure_primitives`)."""


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """The iteration at each batch from primitives measured on this thread (s), every tier
    alike."""
    from lab.data_parallel import measure_primitives, predict_step
    from lab.models import parameter_count

    rows = []
    for batch in points:
        prims = measure_primitives(WIDTHS, batch, (world,), PRIMITIVE_REPEATS)
        seconds = predict_step(prims, WIDTHS, batch, world).makespan_s
        rows.append({"predicted": {model: seconds for model in models},
                     "bytes": 4 * parameter_count(WIDTHS)})
    return rows


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """The real DataParallel iteration at each batch: median, p10, p90 (s)."""
    from lab.data_parallel import measure_step
    from lab.models import parameter_count

    rows = []
    for batch in points:
        timing, _ = measure_step(WIDTHS, batch, world, repeats)
        rows.append({"median_s": timing.median_s, "p10_s": timing.p10_s,
                     "p90_s": timing.p90_s, "bytes": 4 * parameter_count(WIDTHS)})
    return rows


TWIN = register(StrategyTwin(
    name="data_parallel", chapter="4", summary="DataParallel: replicate, scatter the batch, "
    "gather the outputs, reduce the gradients onto one device", parameter="batch",
    points=(256, 1000), quick_points=(64,), predict=_predict, measure=_measure,
    worlds=(2, 4), quick_worlds=(2,), min_world=1, world_unit="replicas", calibrated=False,
    timeline=data_parallel_timeline))
