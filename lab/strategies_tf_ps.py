"""ParameterServerStrategy as a strategy twin (book chapter 19): ``tf.parameter_server``.

TF's ``ParameterServerStrategy`` with a ``ClusterCoordinator``: the coordinator schedules
``K`` closures — each one SGD step of the chapter's small model (an embedding table sharded
over :data:`lab.tf_ps.NUM_PS` ps tasks, a dense weight) — and ``W`` worker processes pull them
from its queue. **World** is the number of workers ``W``; the sweep's **parameter** is the
number of closures ``K``; a run starts ``1 + W + NUM_PS`` processes (the coordinator is this
one). The point is the time from the first ``schedule`` to ``join`` (s); ``bytes`` is what the
``K`` closures move (dispatches, requests, answers, results).

The prediction (:func:`lab.tf_ps.predict`, :mod:`simulator.tf_distribute.ps_strategy`) reads
primitives measured apart from the strategy — the closure's math on one process, a round trip
to a ps task alone and with every worker echoing at once, a ps task's work per request —
never a run of the strategy; it needs no
calibration file (``calibrated=False``). The measurement (:func:`lab.tf_ps.measure`) runs
:func:`backends.tf_distribute.ps_measure.measure_closures`. Rows also carry
``closures_per_worker`` (measured) and ``predicted_closures_per_worker``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """The primitives once, then each point in each tier (s)."""
    from lab.tf_ps import NUM_PS, closure_bytes, primitives, schedule
    from simulator.host.factory import shown_tier

    prims = primitives(world)
    rows = []
    for closures in points:
        runs = {m: schedule(prims, world, closures, m) for m in models}
        rows.append({"predicted": {m: r.makespan_s for m, r in runs.items()},
                     "bytes": closure_bytes(closures), "ps_tasks": NUM_PS,
                     "closure_compute_s": prims.compute_s,
                     "channel_latency_s": prims.latency_s,
                     "busy_latency_s": prims.busy_latency_s,
                     "predicted_closures_per_worker":
                         runs[shown_tier(runs)].closures_per_worker(world)})
    return rows


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """``repeats`` runs of each point on a fresh cluster."""
    from lab.tf_ps import NUM_PS, closure_bytes, measure

    return [{**measure(world, closures, repeats), "bytes": closure_bytes(closures),
             "ps_tasks": NUM_PS} for closures in points]


def _processes(workers: int, closures: Any) -> int:
    from lab.tf_ps import NUM_PS

    return 1 + workers + NUM_PS


TWIN = register(StrategyTwin(
    name="tf.parameter_server", chapter="19",
    summary="TF ParameterServerStrategy: a coordinator schedules K closures (world = W "
            "workers) on an embedding sharded over ps tasks",
    parameter="closures", points=(8, 16, 32), quick_points=(16,), predict=_predict,
    measure=_measure, worlds=(1, 2, 3), quick_worlds=(2,), min_world=1, max_world=4,
    calibrated=False, world_unit="workers", ranks=_processes))
