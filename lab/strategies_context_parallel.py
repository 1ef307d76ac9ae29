"""Context parallelism as strategy twins (book chapter 21): ``cp.ring`` and ``cp.ulysses``.

Each sweeps the sequence length of one causal attention layer (:data:`lab.context_parallel.
SHAPE`: 8 heads of 32 features) whose tokens are split over the ranks. Per point the
prediction (:func:`lab.context_parallel.predict_step`) reads a one-process profile of the
rank's compute (:func:`lab.context_parallel.profile_costs`: each kind of ring step, or
Ulysses' local attention) and the calibration, in either tier; the row adds the bytes a rank
sends (``bytes``) and the attention bytes a rank is predicted to hold
(``predicted_activation_bytes``). The measurement is the real step — forward and backward of
:func:`backends.context_parallel.ring_attention` or
:func:`~backends.context_parallel.ulysses_attention` — on ``world`` processes. Seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration


def _twin(scheme: str) -> tuple[Any, Any]:
    """``scheme``'s :data:`~lab.strategies.Predict` and :data:`~lab.strategies.Measure`."""

    def predict(world: int, points: Sequence[Any], calibration: Calibration,
                models: Sequence[str]) -> list[dict[str, Any]]:
        """Profile each length once (one process), then simulate it in each tier."""
        from lab.context_parallel import (
            activation_bytes,
            predict_step,
            profile_costs,
            traffic_bytes,
        )

        rows = []
        for seq in points:
            costs = profile_costs(scheme, world, seq)
            rows.append({"predicted": {m: predict_step(scheme, world, seq, costs, calibration,
                                                       m) for m in models},
                         "bytes": traffic_bytes(scheme, world, seq),
                         "predicted_activation_bytes": activation_bytes(scheme, world, seq)})
        return rows

    def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
        """The real step at each length on ``world`` processes."""
        from lab.context_parallel import measure_step, traffic_bytes

        return [{**measure_step(scheme, world, seq, repeats),
                 "bytes": traffic_bytes(scheme, world, seq)} for seq in points]

    return predict, measure


SUMMARIES = {
    "ring": "ring attention: K/V blocks round the ring, online softmax, zig-zag causal",
    "ulysses": "DeepSpeed Ulysses: all-to-all sequence ↔ heads around local attention"}

TWINS = {scheme: register(StrategyTwin(
    name=f"cp.{scheme}", chapter="21", summary=text, parameter="seq",
    points=(512, 1024, 2048), quick_points=(256,), predict=_twin(scheme)[0],
    measure=_twin(scheme)[1], worlds=(2, 4), quick_worlds=(2,)))
    for scheme, text in SUMMARIES.items()}
"""The two twins by scheme."""
