"""ZeRO's three stages as strategy twins (book chapter 14): ``zero.1``, ``zero.2``, ``zero.3``.

Each sweeps the model's size — an MLP ``(512, h, h, 512)``, ``h`` its hidden width — and
compares, per point, the predicted training step (:func:`lab.zero.predict_step`, from a
one-process profile and the calibration) with the real :class:`backends.zero.Zero` step on
``world`` processes, and the model-state bytes a rank is predicted to hold
(:func:`simulator.zero.model_state_bytes`) with what it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

BATCH = 64
"""Rows per rank per step."""


def widths(hidden: int) -> tuple[int, ...]:
    """The MLP of a point: 512 → hidden → hidden → 512."""
    return (512, hidden, hidden, 512)


def _comparison(stage: int) -> Any:
    def compare(world: int, points: Sequence[Any], repeats: int,
                calibration: str | Path | None) -> list[dict[str, Any]]:
        from lab.zero import compare_stages

        twin = STAGES[stage]
        rows = []
        for hidden in points:
            (pt,) = compare_stages(world, widths(hidden), BATCH, repeats, stages=(stage,),
                                   calibration=calibration)
            rows.append(row(twin, world, hidden, pt.predicted_s,
                            {"median_s": pt.measured_median_s, "p10_s": pt.measured_p10_s,
                             "p90_s": pt.measured_p90_s}, nbytes=4 * pt.params,
                            predicted_model_state_bytes=pt.predicted_states["total"],
                            measured_model_state_bytes=pt.measured_states["total"]))
        return rows

    return compare


SUMMARIES = {1: "optimizer state partitioned: reduce-scatter the gradients, all-gather "
                "the parameters",
             2: "gradients partitioned too: each bucket reduce-scattered to its owner",
             3: "parameters partitioned too: all-gathered unit by unit, forward and backward"}

STAGES = {stage: register(StrategyTwin(
    name=f"zero.{stage}", chapter="14", summary=f"ZeRO stage {stage}: {text}",
    parameter="hidden", points=(512, 1024, 2048), quick_points=(256,),
    compare=_comparison(stage), worlds=(2, 4), quick_worlds=(2,), memory=True))
    for stage, text in SUMMARIES.items()}
