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
the ring step and the idle engine's CPU per cycle) and the calibration entry, and
:func:`lab.horovod_sweep.sweep` puts its prediction (:func:`lab.horovod_predict.predict`,
:mod:`simulator.horovod`) beside the real twin: a training step of ``backends.horovod``'s
``DistributedOptimizer`` at the same threshold and cycle time
(:func:`lab.horovod_measure.measure_settings`). Nothing is fitted to a Horovod measurement.

Each row adds ``cycle_time_ms``, the predicted and measured cycles and fused all-reduces per
step, and ``exposed_comm_s`` (communication left after backward, predicted). Times in s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

CYCLE_TIME_MS = 1.0
"""The cycle time the threshold sweep holds (``sweep_points``' ``fixed_cycle_ms``)."""


def _compare(world: int, points: Sequence[Any], repeats: int,
             calibration: str | Path | None) -> list[dict[str, Any]]:
    """Primitives once per world, then every fusion threshold in one launch.

    The primitives take as many repeats as the comparison, up to the benchmark's
    (``benchmarks/horovod_accuracy.py``: 10 repeats, 100 rounds of small messages, 0.6 s of
    the idle engine); ``--quick``'s 3 take the short look of notebook 07's smoke mode."""
    from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS
    from lab.horovod_primitives import measure_primitives
    from lab.horovod_sweep import sweep, sweep_points
    from simulator.core.calibration import find_entry

    entry = find_entry(world, "gloo", path=calibration)
    primitives = measure_primitives(DEFAULT_WIDTHS, DEFAULT_BATCH, world, entry.cores,
                                    repeats=min(repeats, 10), rounds=min(100, 10 * repeats),
                                    idle_s=min(0.6, 0.06 * repeats))
    settings = sweep_points(thresholds_mb=[float(t) for t in points], cycles_ms=(),
                            fixed_cycle_ms=CYCLE_TIME_MS)
    points_ = sweep(entry, primitives, DEFAULT_WIDTHS, world, settings, repeats)
    return [row(TWIN, world, threshold, p.predicted_s,
                {"median_s": p.measured_median_s, "p10_s": p.measured_p10_s,
                 "p90_s": p.measured_p90_s}, nbytes=primitives.workload.param_bytes,
                cycle_time_ms=p.cycle_time_ms, predicted_cycles=p.predicted_cycles,
                measured_cycles=p.measured_cycles,
                predicted_all_reduces=p.predicted_all_reduces,
                measured_all_reduces=p.measured_all_reduces, exposed_comm_s=p.exposed_comm_s)
            for threshold, p in zip(points, points_, strict=True)]


TWIN = register(StrategyTwin(
    name="horovod", chapter="7", summary="Horovod: a background thread negotiates ready "
    "gradients every cycle and fuses them into all-reduces up to the fusion threshold",
    parameter="fusion_mb", points=(0.0, 1.0, 4.0, 16.0, 64.0), quick_points=(4.0,),
    compare=_compare, worlds=(2, 4), quick_worlds=(2,)))
