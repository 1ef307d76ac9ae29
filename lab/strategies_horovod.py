"""Horovod as a strategy twin (book chapter 7): ``horovod``.

Horovod's background thread wakes every *cycle time*, negotiates which gradients every rank
has ready, and packs them into all-reduces of up to the *fusion threshold* (Tensor Fusion).
The threshold is the chapter's knob — 0 all-reduces every tensor alone, paying a latency
each; a large one waits to fill one buffer — so the twin sweeps it (``fusion_mb``, MiB, the
threshold sweep of :data:`lab.horovod_sweep.THRESHOLDS_MB`) at a 1 ms cycle time, on the
chapter's MLP (:data:`lab.horovod_predict.DEFAULT_WIDTHS`, six 1024×1024 ``Linear`` layers,
24 MiB of float32 parameters, :data:`lab.horovod_predict.DEFAULT_BATCH` rows a rank).

Per world size, the simulated twin is priced from primitives only
(:func:`lab.horovod_primitives.measure_primitives`: the one-process profile scaled to the
whole model, the SGD step, small-message latencies, the compute/communication interference,
the ring step and the idle engine's CPU per cycle) and the calibration entry
(:func:`lab.horovod_predict.predict`, :mod:`simulator.horovod`), in two tiers: **textbook**,
every all-reduce as gloo's ring on :func:`simulator.host.factory.textbook_cluster`, and
**host**, the calibrated host's clusters of :func:`lab.horovod_predict.costs` (tiny
all-reduces as chains of measured waits); both with the ranks' threads sharing the host's
cores. The real twin is a training step of ``backends.horovod``'s ``DistributedOptimizer`` at
the same threshold and cycle time (:func:`lab.horovod_sweep.measure_points`). Nothing is
fitted to a Horovod measurement.

Each row adds ``cycle_time_ms``; a predicted row the predicted cycles and fused all-reduces
per step and ``exposed_comm_s`` (communication left after backward; of the host tier where it
was predicted), a measured row the measured cycles and all-reduces. Times in s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import horovod_timeline
from simulator.core.calibration import Calibration
from simulator.host.factory import shown_tier

CYCLE_TIME_MS = 1.0
"""The cycle time the threshold sweep holds (``sweep_points``' ``fixed_cycle_ms``)."""

PRIMITIVE_REPEATS = 5
"""Repeats of the primitives (``benchmarks/horovod_accuracy.py`` takes 10): each primitive
with :func:`lab.horovod_primitives.measure_primitives`' repeats, ten rounds of small messages
a repeat, 0.06 s of the idle engine a repeat."""


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """Primitives once, then every fusion threshold in each tier."""
    from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS, predict
    from lab.horovod_primitives import measure_primitives

    entry = calibration.entry(world, "gloo")
    primitives = measure_primitives(DEFAULT_WIDTHS, DEFAULT_BATCH, world, entry.cores,
                                    repeats=PRIMITIVE_REPEATS, rounds=10 * PRIMITIVE_REPEATS,
                                    idle_s=0.06 * PRIMITIVE_REPEATS)
    rows = []
    for threshold in points:
        tiers = {model: predict(entry, primitives, world, float(threshold), CYCLE_TIME_MS,
                                model) for model in models}
        chosen = tiers[shown_tier(tiers)]
        rows.append({"predicted": {model: p.step_s for model, p in tiers.items()},
                     "bytes": primitives.workload.param_bytes, "cycle_time_ms": CYCLE_TIME_MS,
                     "predicted_cycles": chosen.cycles,
                     "predicted_all_reduces": chosen.all_reduces,
                     "exposed_comm_s": chosen.exposed_comm_s})
    return rows


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Every fusion threshold at :data:`CYCLE_TIME_MS` in one launch."""
    from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS
    from lab.horovod_sweep import measure_points
    from lab.models import parameter_count

    got = measure_points(DEFAULT_WIDTHS, DEFAULT_BATCH, world,
                         [(float(t), CYCLE_TIME_MS) for t in points], repeats)
    return [{"median_s": r["median_s"], "p10_s": r["p10_s"], "p90_s": r["p90_s"],
             "bytes": 4 * parameter_count(DEFAULT_WIDTHS), "cycle_time_ms": CYCLE_TIME_MS,
             "measured_cycles": r["cycles_per_step"],
             "measured_all_reduces": r["allreduces_per_step"]} for r in got]


TWIN = register(StrategyTwin(
    name="horovod", chapter="7", summary="Horovod: a background thread negotiates ready "
    "gradients every cycle and fuses them into all-reduces up to the fusion threshold",
    parameter="fusion_mb", points=(0.0, 1.0, 4.0, 16.0, 64.0), quick_points=(4.0,),
    predict=_predict, measure=_measure, worlds=(2, 4), quick_worlds=(2,),
    timeline=horovod_timeline))
