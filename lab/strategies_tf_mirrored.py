"""tf.distribute's mirrored strategies as strategy twins (book chapter 18): ``tf.mirrored``
and ``tf.multi_worker_mirrored``.

Both sweep the global batch a step trains on (``batch``), on the MLP of
:data:`lab.tf_distribute.WIDTHS` (21 MB of float32 parameters), and predict one training step
of TF's custom loop — ``strategy.run`` of forward, loss scaled by the global batch, backward,
``apply_gradients`` (the gradient all-reduce, then SGD on every copy):

* ``tf.mirrored`` (TF: ``MirroredStrategy``) — the world is the number of replicas, threads of
  one process as on a multi-GPU machine's devices; the prediction
  (:func:`lab.tf_distribute.predict_mirrored`) reads one-thread primitives only (compute
  profile, copy and addition rates), so it is calibration-free (``calibrated=False``) and
  both tiers give the same number; the all-reduce is the in-process ring (TF's
  ``NcclAllReduce`` on GPUs);
* ``tf.multi_worker_mirrored`` (TF: ``MultiWorkerMirroredStrategy``) — the world is the
  number of worker processes; the prediction (:func:`lab.tf_distribute.predict_multi_worker`)
  puts the same profile beside our ring all-reduce on the calibrated local cluster, in each
  tier. A measured row adds ``ddp_median_s``: our DDP (:mod:`backends.ddp`) on the same
  shards, measured interleaved with the strategy.

Nothing is fitted to a measurement of either strategy. Times in s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration

PRIMITIVE_REPEATS = 5
"""Repeats of each one-thread primitive."""


def _predict_mirrored(world: int, points: Sequence[Any], calibration: Calibration,
                      models: Sequence[str]) -> list[dict[str, Any]]:
    """The step at each batch from one-thread primitives (s), every tier alike."""
    from lab.tf_distribute import WIDTHS, param_bytes, predict_mirrored

    rows = []
    for batch in points:
        step = predict_mirrored(WIDTHS, batch, world)
        rows.append({"predicted": {model: step.step_s for model in models},
                     "bytes": param_bytes(WIDTHS), "all_reduce_s": step.all_reduce_s})
    return rows


def _measure_mirrored(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """The real MirroredStrategy step at each batch: median, p10, p90 (s)."""
    from lab.tf_distribute import WIDTHS, measure_mirrored, param_bytes

    rows = []
    for batch in points:
        timing = measure_mirrored(WIDTHS, batch, world, repeats)
        rows.append({"median_s": timing.median_s, "p10_s": timing.p10_s,
                     "p90_s": timing.p90_s, "bytes": param_bytes(WIDTHS)})
    return rows


def _predict_multi_worker(world: int, points: Sequence[Any], calibration: Calibration,
                          models: Sequence[str]) -> list[dict[str, Any]]:
    """The step at each batch on the calibrated cluster, in each tier (s)."""
    from lab.tf_distribute import WIDTHS, param_bytes, predict_multi_worker, primitives
    from simulator.host.factory import shown_tier

    entry = calibration.entry(world, "gloo")
    rows = []
    for batch in points:
        prims = primitives(WIDTHS, batch, world, PRIMITIVE_REPEATS)
        tiers = {model: predict_multi_worker(entry, WIDTHS, batch, world, model, prims)
                 for model in models}
        rows.append({"predicted": {model: tiers[model].step_s for model in models},
                     "bytes": param_bytes(WIDTHS),
                     "all_reduce_s": tiers[shown_tier(tiers)].all_reduce_s})
    return rows


def _measure_multi_worker(world: int, points: Sequence[Any], repeats: int
                          ) -> list[dict[str, Any]]:
    """The real MultiWorkerMirroredStrategy step at each batch, our DDP's beside it (s)."""
    from lab.tf_distribute import WIDTHS, measure_multi_worker, param_bytes

    rows = []
    for batch in points:
        by = measure_multi_worker(WIDTHS, batch, world, repeats)
        ours = by["strategy"]
        rows.append({"median_s": ours["median_s"], "p10_s": ours["p10_s"],
                     "p90_s": ours["p90_s"], "bytes": param_bytes(WIDTHS),
                     "ddp_median_s": by["ddp"]["median_s"]})
    return rows


MIRRORED = register(StrategyTwin(
    name="tf.mirrored", chapter="17-18", summary="tf.distribute.MirroredStrategy: replicas on the "
    "devices of one process, gradients all-reduced between them (in-process ring)",
    parameter="batch", points=(64, 256, 1000), quick_points=(64,), predict=_predict_mirrored,
    measure=_measure_mirrored, worlds=(2, 4), quick_worlds=(2,), min_world=1,
    world_unit="replicas", calibrated=False))

MULTI_WORKER = register(StrategyTwin(
    name="tf.multi_worker_mirrored", chapter="18", summary="tf.distribute."
    "MultiWorkerMirroredStrategy: one replica per process, the gradients' ring all-reduce "
    "between processes every step", parameter="batch", points=(64, 256, 1000),
    quick_points=(64,), predict=_predict_multi_worker, measure=_measure_multi_worker,
    worlds=(2, 4), quick_worlds=(2,), world_unit="workers"))
