"""FSDP as a strategy twin (chapter 20): ``fsdp``.

It sweeps the model's size — an MLP ``(512, h, h, 512)``, three units, ``h`` its hidden
width — with resharding after forward and prefetching on (PyTorch's defaults). Per point
the prediction (:func:`lab.fsdp.predict_step`) reads a one-process profile of the units, the
Adam step timed with every rank stepping its shard at once, and the calibration, in either
tier (textbook α-β-γ, or the host's measured effects), the ranks sharing the host's cores;
it also gives the bytes each rank sends (``predicted_traffic_bytes``, ZeRO-3's ``3Ψ``), its
model states (``predicted_model_state_bytes``, ``(4 + 4 + 8)·Ψ/N``) and the most bytes a rank
holds during a step (``predicted_peak_bytes``, from the units' sizes and the batch only).
The measurement is the real :class:`backends.fsdp.FSDP` step on ``world`` processes
(:func:`lab.fsdp.measure`), the largest model states and peak over the ranks
(``measured_model_state_bytes``, ``measured_peak_bytes``) and PyTorch's ``fully_shard`` timed
the same way (``pytorch_median_s``, and ``speed_ratio``: ours ÷ PyTorch's). Seconds and
bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration

BATCH = 16
"""Rows per rank per step: few, so that the gathered units, not the activations, dominate
the memory of a step (what FSDP is about)."""


def widths(hidden: int) -> tuple[int, ...]:
    """The MLP of a point: 512 → hidden → hidden → 512."""
    return (512, hidden, hidden, 512)


def predict(world: int, points: Sequence[Any], calibration: Calibration,
            models: Sequence[str]) -> list[dict[str, Any]]:
    """Profile each model once (one process, each unit through our FSDP wrapper so its
    hooks' bookkeeping is in the unit's seconds; the update on every rank at once), then
    simulate it in each tier."""
    from lab.fsdp import (
        predict_model_state_bytes,
        predict_peak_bytes,
        predict_step,
        predict_traffic_bytes,
        profile_units,
    )
    from lab.models import mlp, parameter_count

    rows = []
    for hidden in points:
        units = profile_units(mlp(widths(hidden)), BATCH, world)
        rows.append({"predicted": {model: predict_step(world, widths(hidden), BATCH,
                                                       calibration, model, units=units)
                                   for model in models},
                     "bytes": 4 * parameter_count(widths(hidden)),
                     "predicted_traffic_bytes": predict_traffic_bytes(world, widths(hidden)),
                     "predicted_model_state_bytes": predict_model_state_bytes(world,
                                                                              widths(hidden)),
                     "predicted_peak_bytes": predict_peak_bytes(world, widths(hidden), BATCH)})
    return rows


def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """The real step of each model on ``world`` processes, and ``fully_shard``'s."""
    from lab.fsdp import measure as measure_fsdp
    from lab.models import parameter_count

    rows = []
    for hidden in points:
        got = measure_fsdp(world, widths(hidden), BATCH, repeats)
        rows.append({"median_s": got["median_s"], "p10_s": got["p10_s"],
                     "p90_s": got["p90_s"], "bytes": 4 * parameter_count(widths(hidden)),
                     "measured_peak_bytes": got["peak_bytes"],
                     "measured_model_state_bytes": got["model_state_bytes"],
                     "pytorch_median_s": got["pytorch_median_s"],
                     "speed_ratio": got["median_s"] / got["pytorch_median_s"]})
    return rows


FSDP = register(StrategyTwin(
    name="fsdp", chapter="20",
    summary="FSDP: units sharded, all-gathered (prefetched) around their forward and "
            "backward, gradients reduce-scattered",
    parameter="hidden", points=(512, 1024, 2048), quick_points=(256,), predict=predict,
    measure=measure, worlds=(2, 4), quick_worlds=(2,), memory=True))
