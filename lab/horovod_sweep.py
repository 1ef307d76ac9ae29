"""Prediction beside measurement: Horovod's step time over its two knobs, and against DDP.

Chapter 7. :func:`sweep_points` and :func:`sweep` give :class:`Point` rows of the predicted
(:func:`lab.horovod_predict.predict`) and measured (:func:`lab.horovod_measure.measure_settings`)
step time over fusion thresholds and cycle times at one world size; :func:`versus_ddp` gives
:class:`Versus` rows: Horovod against our DDP on the same model, both predicted and measured in
one launch. Used by notebook 07 and ``benchmarks/horovod_accuracy.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.horovod_measure import measure_settings
from lab.horovod_predict import predict
from lab.horovod_primitives import Primitives
from simulator.core.calibration import CalibrationEntry

THRESHOLDS_MB = (0.0, 1.0, 4.0, 16.0, 64.0)
"""The fusion-threshold sweep, MiB (0: no fusion)."""
CYCLES_MS = (0.5, 2.0, 8.0, 25.0)
"""The cycle-time sweep, ms."""


@dataclass(frozen=True)
class Point:
    """One (fusion threshold, cycle time) at one world size: prediction beside measurement.

    Times in s; ``sweep`` is ``"threshold"`` or ``"cycle"`` (which knob the point varies).
    """

    sweep: str
    world: int
    fusion_threshold_mb: float
    cycle_time_ms: float
    predicted_s: float
    predicted_cycles: int
    predicted_all_reduces: int
    exposed_comm_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float
    measured_cycles: float
    measured_all_reduces: float

    @property
    def rel_error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted_s - self.measured_median_s) / self.measured_median_s


def sweep_points(thresholds_mb: Sequence[float] = THRESHOLDS_MB,
                 cycles_ms: Sequence[float] = CYCLES_MS, fixed_cycle_ms: float = 1.0,
                 fixed_threshold_mb: float = 128.0) -> list[tuple[str, float, float]]:
    """``(sweep, threshold MiB, cycle ms)``: thresholds at ``fixed_cycle_ms``, then cycle
    times at ``fixed_threshold_mb``."""
    return ([("threshold", t, fixed_cycle_ms) for t in thresholds_mb]
            + [("cycle", fixed_threshold_mb, c) for c in cycles_ms])


def measure_points(widths: Sequence[int], batch: int, world: int,
                   settings: Sequence[tuple[float, float]], repeats: int = 10
                   ) -> list[dict[str, Any]]:
    """The real engine at every ``(threshold MiB, cycle ms)`` on ``world`` processes, one
    launch: rank 0's row of each (:func:`lab.horovod_measure.measure_settings`)."""
    from backends.launch import spawn

    return list(spawn(measure_settings, world, list(widths), batch, list(settings), repeats,
                      timeout=600)[0])


def sweep(entry: CalibrationEntry, primitives: Primitives, widths: Sequence[int], world: int,
          points: Sequence[tuple[str, float, float]], repeats: int = 10) -> list[Point]:
    """Predict and measure every point at one world size (one launch)."""
    rows = measure_points(widths, primitives.workload.batch, world,
                          [(t, c) for _, t, c in points], repeats)
    out = []
    for (kind, t, c), row in zip(points, rows, strict=True):
        pred = predict(entry, primitives, world, t, c)
        out.append(Point(kind, world, t, c, pred.step_s, pred.cycles, pred.all_reduces,
                         pred.exposed_comm_s, row["median_s"], row["p10_s"], row["p90_s"],
                         row["cycles_per_step"], row["allreduces_per_step"]))
    return out


def _versus_rank(widths: Sequence[int], batch: int, points: Sequence[tuple[float, float]],
                 caps: Sequence[float | None], repeats: int) -> list[dict[str, Any]]:
    """Rank function: the real engine at ``points``, then our DDP at ``caps``, one launch."""
    from lab.ddp import measure_steps

    rows = [{"engine": "horovod", **row}
            for row in measure_settings(widths, batch, points, repeats)]
    return rows + [{"engine": "ddp", **row}
                   for row in measure_steps(widths, batch, caps, repeats, which=("ours",))]


@dataclass(frozen=True)
class Versus:
    """One engine at one setting on the same model and world: predicted beside measured (s).

    ``setting`` reads ``"threshold 128 MiB, cycle 1 ms"`` or ``"buckets 25 MiB"``;
    ``exposed_comm_s`` is the predicted communication left after backward.
    """

    world: int
    engine: str
    setting: str
    predicted_s: float
    exposed_comm_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float

    @property
    def rel_error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted_s - self.measured_median_s) / self.measured_median_s


def versus_ddp(entry: CalibrationEntry, primitives: Primitives, widths: Sequence[int],
               world: int, points: Sequence[tuple[float, float]] = ((128.0, 1.0),),
               caps_mb: Sequence[float | None] = (None,), repeats: int = 10) -> list[Versus]:
    """Horovod (at each ``(threshold MiB, cycle ms)``) against our DDP (at each bucket cap,
    ``None``: PyTorch's 25 MiB with a 1 MiB first bucket) on the same MLP and world, both
    predicted (:func:`predict`, :func:`lab.ddp.predict` with the same profile and
    interference) and measured in one launch."""
    from backends.launch import spawn
    from lab.ddp import predict as predict_ddp

    rows = spawn(_versus_rank, world, list(widths), primitives.workload.batch, list(points),
                 list(caps_mb), repeats, timeout=600)[0]
    out = []
    for row in rows:
        if row["engine"] == "horovod":
            t, c = row["fusion_threshold_mb"], row["cycle_time_ms"]
            pred = predict(entry, primitives, world, t, c)
            setting = f"threshold {t:g} MiB, cycle {c:g} ms"
            predicted, exposed = pred.step_s, pred.exposed_comm_s
        else:
            cap = row["bucket_cap_mb"]
            ddp = predict_ddp(entry, primitives.workload, world, cap,
                              contention=primitives.interference)
            setting = "buckets 25 MiB (first 1 MiB)" if cap is None else f"buckets {cap:g} MiB"
            predicted, exposed = ddp.step_s, ddp.exposed_comm_s
        out.append(Versus(world, row["engine"], setting, predicted, exposed, row["median_s"],
                          row["p10_s"], row["p90_s"]))
    return out
