"""Prediction beside measurement for one setup: the record the benchmark and notebooks use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_cores
from lab.pipeline.measurement import measure
from lab.pipeline.prediction import predict
from lab.pipeline.profiling import profile
from simulator.pipeline.profile import LayerProfile
from simulator.pipeline.simulate import PipelineResult


def side_by_side(setup: PipelineSetup, repeats: int = 10, profile_repeats: int = 10,
                 calibration: str | Path | None = None, cores: float | None = None,
                 builtin: bool = True, layer_profile: list[LayerProfile] | None = None,
                 stage_times: list[LayerProfile] | None = None) -> dict[str, Any]:
    """Profile, predict and measure one setup; the record the benchmark and notebooks use.
    ``stage_times``: per-stage times for the prediction (see :func:`predict`)."""
    layer_profile = layer_profile or profile(setup, profile_repeats)
    setup = setup.with_balance(layer_profile)
    predicted = predict(setup, layer_profile, calibration, cores, stage_times=stage_times)
    measured = measure(setup, repeats, builtin)
    return {"record": record(setup, predicted, measured), "predicted": predicted,
            "measured": measured, "profile": layer_profile, "setup": setup}


def record(setup: PipelineSetup, predicted: PipelineResult,
           measured: dict[str, Any]) -> dict[str, Any]:
    """One point: prediction, measurement, relative errors (time and memory per stage)."""
    median = measured["timing"]["median_s"]
    mem_pred = predicted.peak_activation_bytes
    mem_meas = measured["peak_activation_bytes"]
    return {
        "stages": setup.stages, "microbatches": setup.microbatches,
        "schedule": setup.schedule, "checkpoint": setup.checkpoint, "chunks": setup.chunks,
        "balance": list(setup.balance or ()), "batch": setup.batch,
        "predicted_s": predicted.step_time_s, "measured_median_s": median,
        "measured_p10_s": measured["timing"]["p10_s"],
        "measured_p90_s": measured["timing"]["p90_s"],
        "rel_error": (predicted.step_time_s - median) / median,
        "predicted_bubble": predicted.bubble_fraction,
        "predicted_peak_activation_bytes": mem_pred,
        "measured_peak_activation_bytes": mem_meas,
        "memory_rel_error": [(p - m) / m if m else 0.0 for p, m in
                             zip(mem_pred, mem_meas, strict=False)],
        "builtin_median_s": (measured["builtin"] or {}).get("median_s"),
        "foreign_cpu_s": measured["foreign_cpu_s"],
        "foreign_cpu_share": (measured["foreign_cpu_s"] or 0.0)
        / (measured["window_s"] * host_cores()),
    }
