"""DataParallel as a strategy twin (book chapter 4): ``data_parallel``.

The world is the number of replicas — threads of one process, as in PyTorch's DataParallel —
and the sweep is the batch the replicas split. Each point compares the predicted iteration
(:func:`lab.data_parallel.predict_step`, from one-thread primitives) with the real
:class:`backends.data_parallel.DataParallel` iteration (:func:`lab.data_parallel.compare`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

WIDTHS = (512, 2048, 2048, 10)
"""The MLP (5.3 M parameters, as :data:`lab.data_parallel.DEFAULT_WIDTHS`)."""


def _compare(world: int, points: Sequence[Any], repeats: int,
             calibration: str | Path | None) -> list[dict[str, Any]]:
    """Calibration-free: DataParallel's primitives are measured on this process's thread."""
    from lab.data_parallel import compare
    from lab.models import parameter_count

    rows = []
    for batch in points:
        (r,) = compare(WIDTHS, batch, replicas=(world,), repeats=repeats)
        rows.append(row(TWIN, world, batch, r["predicted_s"],
                        {"median_s": r["measured_median_s"], "p10_s": r["measured_p10_s"],
                         "p90_s": r["measured_p90_s"]},
                        nbytes=4 * parameter_count(WIDTHS)))
    return rows


TWIN = register(StrategyTwin(
    name="data_parallel", chapter="4", summary="DataParallel: replicate, scatter the batch, "
    "gather the outputs, reduce the gradients onto one device", parameter="batch",
    points=(256, 1000), quick_points=(64,), compare=_compare, worlds=(2, 4),
    quick_worlds=(2,), min_world=1, world_unit="replicas"))
