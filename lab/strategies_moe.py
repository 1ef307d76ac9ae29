"""Expert parallelism as a strategy twin (book chapter 22): ``moe``.

A mixture-of-experts layer (:data:`lab.moe.CONFIG`: ``d = 64``, ``h = 128``, 8 experts,
top-2, capacity factor 1.25) with its experts sharded over the ranks, swept over the tokens
each rank routes. Per point the prediction (:func:`lab.moe.predict_step`) reads the routing
histogram and the per-rank costs from ONE process (the router on every rank's group, each
expert on the rows it will get, the layer's own work) and the calibration, and simulates one
step (:func:`simulator.moe.simulate_moe_step`: count exchange, dispatch, experts, combine and
their backward) in two tiers: **textbook** and **host**, the ranks sharing the host's cores.
The measurement is the real :class:`backends.moe.parallel.ExpertParallelMoE` step on
``world`` processes (:func:`lab.moe.measure_step`). Rows carry the bytes the busiest rank moves
per exchange, predicted from the one-process histogram and measured from the ranks' own
routing, and the assignments dropped. Seconds and bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration


def predict(world: int, points: Sequence[Any], calibration: Calibration,
            models: Sequence[str]) -> list[dict[str, Any]]:
    """Route and profile in one process, then simulate each point in each tier."""
    from lab.moe import predict_step

    return [predict_step(world, tokens, calibration, tuple(models)) for tokens in points]


def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """The real expert-parallel step at each point on ``world`` processes."""
    from lab.moe import measure_step

    return [measure_step(world, tokens, repeats) for tokens in points]


MOE = register(StrategyTwin(
    name="moe", chapter="22",
    summary="expert parallelism: experts sharded over ranks, tokens dispatched and combined "
            "by uneven all-to-alls",
    parameter="tokens", points=(256, 1024, 4096), quick_points=(128,), predict=predict,
    measure=measure, worlds=(2, 4), quick_worlds=(2,)))
