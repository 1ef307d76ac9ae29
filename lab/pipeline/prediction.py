"""The simulated pipeline step of a setup on this machine's calibrated cluster.

:func:`predict` hands the one-process profile to the simulated twin
(:func:`simulator.pipeline.simulate.simulate_pipeline`) on this machine's calibrated cluster
(:func:`local_cluster`, the host tier; or any ``cluster``, such as the textbook tier's
``local_cluster(…, model="textbook")``), with the host's CPU cores shared by the
stage processes.

Units: seconds, bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_cores
from lab.pipeline.stages import stage_profile
from simulator.core.calibration import Calibration
from simulator.core.hardware import Cluster
from simulator.host import factory
from simulator.host.effects import BUSY_HOST
from simulator.pipeline.profile import LayerProfile
from simulator.pipeline.simulate import PipelineResult, simulate_pipeline


def local_cluster(stages: int, calibration: Calibration | str | Path | None = None,
                  backend: str = "gloo", model: str = "host") -> tuple[Cluster, str]:
    """This machine's calibrated cluster for ``stages`` ranks in tier ``model``
    (:func:`simulator.host.factory.local_cluster`; the host tier
    :data:`~simulator.host.effects.BUSY_HOST`), and a description of it. ``calibration``: the
    file read once, or its path (default: the user's).

    Without a calibration entry (a fresh checkout, CI) the host tier falls back to a *free*
    network (no latency, unbounded bandwidth), so a prediction shows compute only — and says
    so; ``distml-lab calibrate --world N`` measures the real one. The textbook tier (the
    entry's α, B, γ) has nothing to fall back on: :class:`CalibrationError`.
    """
    from simulator.core.calibration import CalibrationError
    from simulator.core.hardware import Cluster, Device
    from simulator.core.network import Link, Topology

    try:
        cluster = factory.local_cluster(Calibration.of(calibration).entry(stages, backend),
                                        stages, model, effects=BUSY_HOST)
        return cluster, f"calibrated cluster {cluster.name}"
    except CalibrationError:
        if model == "textbook":
            raise
        cpu = Device("cpu", 1e11, 1e10, math.inf)
        free = Topology.fully_connected(stages, Link(0.0, 1e18, "none"))
        return (Cluster.homogeneous("free", cpu, free),
                "free network (no calibration found: run distml-lab calibrate --world "
                f"{stages})")


def predict(setup: PipelineSetup, layer_profile: list[LayerProfile],
            calibration: Calibration | str | Path | None = None, cores: float | None = None,
            backend: str = "gloo", cluster: Cluster | None = None,
            stage_times: list[LayerProfile] | None = None) -> PipelineResult:
    """The simulated step of ``setup`` on this machine's calibrated cluster (or ``cluster``).

    ``cores``: CPU cores the stage processes share (``None``: this host's; ``math.inf``: one
    core each, no contention). ``stage_times``: per-stage times (:func:`profile_stages` or
    :func:`profile_stages_together`) instead of the per-layer profile's sums; the bytes still
    come from ``layer_profile``.
    """
    if setup.stages < 2:
        raise ValueError("a pipeline needs at least 2 stages to predict")
    setup = setup.with_balance(layer_profile)
    if cluster is None:
        cluster, _ = local_cluster(setup.stages, calibration, backend)
    itemsize = 4
    input_bytes = math.ceil(setup.batch / setup.microbatches) * setup.width * itemsize
    costs, balance = layer_profile, list(setup.balance or ())
    if stage_times is not None:
        costs = stage_profile(layer_profile, tuple(balance), stage_times)
        balance = [1] * len(costs)
    return simulate_pipeline(cluster, costs, balance, setup.microbatches, setup.schedule,
                             setup.checkpoint, chunks=setup.chunks, input_bytes=input_bytes,
                             cores=host_cores() if cores is None else cores)
