"""Prediction beside measurement: a bucket-cap sweep at one world size.

:func:`predict_caps` predicts every cap (:func:`lab.ddp.prediction.predict`, with and without
overlap), :func:`measure_caps` measures both DDPs at every cap in one launch
(:func:`lab.ddp.measurement.measure_steps`), and :func:`sweep` puts them side by side: each
:class:`Point` holds both and the relative errors.

Units: seconds, MiB for bucket caps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.ddp.measurement import measure_steps
from lab.ddp.prediction import predict
from simulator.core.calibration import CalibrationEntry
from simulator.core.hardware import Cluster
from simulator.ddp import DDPPrediction, Interference, MiB, Workload


@dataclass(frozen=True)
class Point:
    """One bucket cap at one world size: prediction beside both measured DDPs (s)."""

    world: int
    bucket_cap_mb: float
    buckets: int
    predicted_s: float
    predicted_no_overlap_s: float
    exposed_comm_s: float
    ours_median_s: float
    ours_p10_s: float
    ours_p90_s: float
    pytorch_median_s: float
    pytorch_p10_s: float
    pytorch_p90_s: float
    ours_no_overlap_median_s: float

    @property
    def ours_error(self) -> float:
        """(predicted − ours measured) / ours measured."""
        return (self.predicted_s - self.ours_median_s) / self.ours_median_s

    @property
    def pytorch_error(self) -> float:
        """(predicted − PyTorch measured) / PyTorch measured."""
        return (self.predicted_s - self.pytorch_median_s) / self.pytorch_median_s

    @property
    def ratio(self) -> float:
        """Our step time over PyTorch's, measured side by side."""
        return self.ours_median_s / self.pytorch_median_s


def predict_caps(entry: CalibrationEntry, workload: Workload, world: int,
                 caps: Sequence[float], contention: Interference | None = None,
                 cluster: Cluster | None = None) -> list[tuple[DDPPrediction, DDPPrediction]]:
    """Every cap's predicted step with overlap and without, at one world size
    (:func:`lab.ddp.prediction.predict`; ``cluster`` as there)."""
    return [(predict(entry, workload, world, cap, True, contention, cluster),
             predict(entry, workload, world, cap, False, contention, cluster)) for cap in caps]


def measure_caps(widths: Sequence[int], batch: int, world: int, caps: Sequence[float],
                 repeats: int = 10) -> dict[tuple[str, float], dict[str, Any]]:
    """Our DDP (with and without overlap) and PyTorch's at every cap on ``world`` processes,
    one launch: timings (s) by ``(ddp, cap)``, ``ddp`` one of ``ours``, ``pytorch``,
    ``ours-serial``."""
    from backends.launch import spawn

    rows = spawn(measure_steps, world, list(widths), batch, list(caps), repeats,
                 timeout=120)[0]
    return {(r["ddp"], r["bucket_cap_mb"]): r for r in rows}


def sweep(entry: CalibrationEntry, workload: Workload, widths: Sequence[int], world: int,
          caps: Sequence[float], repeats: int = 10,
          contention: Interference | None = None) -> list[Point]:
    """Predict and measure every cap at one world size (one launch); ``contention`` is
    :func:`interference` at this world size."""
    by = measure_caps(widths, workload.batch, world, caps, repeats)
    points = []
    for cap, (on, off) in zip(caps, predict_caps(entry, workload, world, caps, contention),
                              strict=True):
        ours, theirs, serial = by[("ours", cap)], by[("pytorch", cap)], by[("ours-serial", cap)]
        points.append(Point(world, cap, len(on.buckets), on.step_s, off.step_s,
                            on.exposed_comm_s, ours["median_s"], ours["p10_s"], ours["p90_s"],
                            theirs["median_s"], theirs["p10_s"], theirs["p90_s"],
                            serial["median_s"]))
    return points


def caps_mb(workload: Workload) -> list[float]:
    """A bucket-cap sweep for ``workload``: from one layer per bucket to one bucket, MiB."""
    layer = max(sum(layer.param_bytes) for layer in workload.layers) / MiB
    total = workload.param_bytes / MiB
    caps, cap = [], layer / 2
    while cap < 2 * total:
        caps.append(round(cap, 3))
        cap *= 2.5
    return caps
