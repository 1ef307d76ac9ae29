"""Asynchronous PipeDream measured beside its simulated twin (book ch. 10–11).

:func:`measure_pipedream` streams ``minibatches`` inputs through the real asynchronous runtime
(:class:`backends.pipeline.pipedream.PipeDream`: 1F1B, weight stashing, optional vertical
sync) on one process per stage and returns, per stage, the most weight versions it held, the
plan's count (:func:`simulator.pipeline.schedules.pipedream_async`), the losses and a traced
timeline. :func:`predict_pipedream` times the same model from its one-process profile with
:func:`simulator.pipeline.simulate.simulate_pipeline` (schedule ``pipedream``). Nothing of
the measured run feeds the prediction.

The setup (:class:`PipeDreamSetup`) and the rank program (:func:`pipedream_rank`) live with the
real twin, in :mod:`backends.pipeline.pipedream_measure`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from backends.pipeline.pipedream_measure import PipeDreamSetup, pipedream_rank
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.pipeline.profile import LayerProfile
from simulator.pipeline.simulate import PipelineResult, simulate_pipeline

__all__ = ["PipeDreamSetup", "measure_pipedream", "pipedream_rank", "predict_pipedream",
           "profile_pipedream"]


def measure_pipedream(setup: PipeDreamSetup, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``setup`` for real on ``setup.stages`` processes.

    Returns ``versions`` and ``planned_versions`` (per stage), ``losses`` (last stage, per
    input) and ``trace`` (every rank's spans, shifted to start at 0).
    """
    from backends.launch import spawn

    if setup.stages < 2:
        raise ValueError("a PipeDream pipeline needs at least 2 stages")
    results = spawn(pipedream_rank, setup.stages, asdict(setup), timeout=timeout)
    return {"versions": [r["versions"] for r in results],
            "planned_versions": [r["planned_versions"] for r in results],
            "losses": results[-1]["losses"],
            "trace": Trace.from_records(results[0]["trace"]).shifted()}


def profile_pipedream(setup: PipeDreamSetup, repeats: int = 10) -> list[LayerProfile]:
    """The model's per-layer profile on ONE process, at one input of ``batch`` examples."""
    import torch

    from backends.pipeline.profiler import profile_layers

    model, xs, _ = setup.build()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the rank processes (OMP_NUM_THREADS=1)
    try:
        return profile_layers(model, xs[0], repeats=repeats)
    finally:
        torch.set_num_threads(threads)


def predict_pipedream(setup: PipeDreamSetup, profile: list[LayerProfile], cluster: Cluster,
                      cores: float) -> PipelineResult:
    """The simulated run of ``setup`` (schedule ``pipedream``) on ``cluster``, whose ranks
    share ``cores`` CPU cores."""
    input_bytes = setup.batch * setup.width * 4
    return simulate_pipeline(cluster, profile, list(setup.balance), setup.minibatches,
                             "pipedream", input_bytes=input_bytes, cores=cores)
