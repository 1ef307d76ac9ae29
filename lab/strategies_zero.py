"""ZeRO's three stages as strategy twins (book chapter 14): ``zero.1``, ``zero.2``, ``zero.3``.

Each sweeps the model's size — an MLP ``(512, h, h, 512)``, ``h`` its hidden width. Per
point the prediction (:func:`lab.zero.predict_step`) reads a one-process profile
(:func:`lab.zero.profile_units`), the optimizer step timed with every rank stepping at once
(:func:`lab.zero.optimizer_step_together_s`) and the calibration, in two tiers: **textbook**,
the collectives on :func:`simulator.host.factory.textbook_cluster` (α, B, the shared bus, γ),
and **host**, on the calibrated host with its measured effects; both with the ranks sharing
the host's cores. It also gives the model-state bytes a rank is predicted to hold
(:func:`simulator.zero.model_state_bytes`, ``predicted_model_state_bytes``, the textbook's
``(4 + 4 + 8)·Ψ`` partitioned per stage) and the most bytes a rank holds during the step
(:func:`lab.zero.predict_peak_bytes`, ``predicted_peak_bytes``: model states, the stage's
buffers, activations, the optimizer's temporaries — from parameter counts and shapes only).
The measurement is the real :class:`backends.zero.Zero` step on ``world`` processes
(:func:`lab.zero.measure_stages`), the model-state bytes a rank holds
(``measured_model_state_bytes``) and the largest peak over the ranks
(``measured_peak_bytes``, from live storages and the allocator's own events:
:func:`backends.zero_measure.step_peak_bytes`); a comparison row adds ``rel_error_peak``
(:func:`lab.strategies.merge`). :func:`lab.zero.step_timelines` draws one step of each.
Seconds and bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration
from simulator.core.engine import Trace

BATCH = 64
"""Rows per rank per step."""


def widths(hidden: int) -> tuple[int, ...]:
    """The MLP of a point: 512 → hidden → hidden → 512."""
    return (512, hidden, hidden, 512)


def _twin(stage: int) -> tuple[Any, Any, Any]:
    """Stage ``stage``'s :data:`~lab.strategies.Predict`, :data:`~lab.strategies.Measure` and
    :data:`~lab.strategies.Timeline`."""
    def predict(world: int, points: Sequence[Any], calibration: Calibration,
                models: Sequence[str]) -> list[dict[str, Any]]:
        """Profile each model once (one process, then the update on every rank at once),
        then simulate it in each tier."""
        from lab.models import mlp, parameter_count
        from lab.zero import (
            optimizer_step_together_s,
            predict_peak_bytes,
            predict_step,
            profile_units,
        )
        from simulator.zero import model_state_bytes

        rows = []
        for hidden in points:
            units = profile_units(mlp(widths(hidden)), BATCH)
            params = parameter_count(widths(hidden))
            together = optimizer_step_together_s(
                world, params if stage == 0 else -(-params // world))
            states = model_state_bytes(params, stage, world, "fp32", "adam").as_dict()
            rows.append({"predicted": {model: predict_step(world, stage, units, calibration,
                                                           together, model)
                                       for model in models},
                         "bytes": 4 * params, "predicted_model_state_bytes": states["total"],
                         "predicted_peak_bytes": predict_peak_bytes(world, stage,
                                                                    mlp(widths(hidden)), BATCH)})
        return rows

    def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
        """The real step of each model on ``world`` processes."""
        from lab.models import parameter_count
        from lab.zero import measure_stages

        rows = []
        for hidden in points:
            got = measure_stages(world, (stage,), widths(hidden), BATCH, repeats)[stage]
            rows.append({"median_s": got["median_s"], "p10_s": got["p10_s"],
                         "p90_s": got["p90_s"], "bytes": 4 * parameter_count(widths(hidden)),
                         "measured_model_state_bytes": got["model_states"]["total"],
                         "measured_peak_bytes": got["peak_bytes"]})
        return rows

    def timeline(world: int, hidden: Any, calibration: Calibration, model: str
                 ) -> tuple[Trace, Trace | None]:
        """One step of the model of width ``hidden``, predicted in tier ``model`` and
        measured."""
        from lab.zero import step_timelines

        return step_timelines(world, stage, widths(hidden), BATCH, calibration, model)

    return predict, measure, timeline


SUMMARIES = {1: "optimizer state partitioned: reduce-scatter the gradients, all-gather "
                "the parameters",
             2: "gradients partitioned too: each bucket reduce-scattered to its owner",
             3: "parameters partitioned too: all-gathered unit by unit, forward and backward"}


def _register(stage: int, text: str) -> StrategyTwin:
    predict, measure, timeline = _twin(stage)
    return register(StrategyTwin(
        name=f"zero.{stage}", chapter="14", summary=f"ZeRO stage {stage}: {text}",
        parameter="hidden", points=(512, 1024, 2048), quick_points=(256,), predict=predict,
        measure=measure, worlds=(2, 4), quick_worlds=(2,), memory=True, timeline=timeline))


STAGES = {stage: _register(stage, text) for stage, text in SUMMARIES.items()}
