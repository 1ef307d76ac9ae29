"""The prediction of a real run, and the comparison with it.

:func:`spec_for` builds the simulated twin's :class:`~simulator.parameter_server.PSSpec` of a
:class:`~backends.parameter_server.PSConfig`; :func:`predict` simulates it on this machine's
calibrated twin, in the textbook or the host tier (or on the van's measured messages);
:func:`compare` runs the real twin and the prediction for one configuration and returns both.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from lab.parameter_server.profile import profile_compute, profile_costs
from lab.parameter_server.van import measure_anysource
from simulator.core.calibration import Calibration, CalibrationEntry
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster
from simulator.parameter_server import (
    PSCosts,
    PSSpec,
    PSTimeline,
    SparseLRData,
    VanLink,
    dense_slices,
    simulate,
    sparse_lr_slices,
    straggler_delays,
    van_cluster,
)


def spec_for(cfg: Any, costs: PSCosts, compute_s: np.ndarray, cores: float,
             van: VanLink | None = None) -> PSSpec:
    """The simulated twin's spec of a real :class:`~backends.parameter_server.PSConfig`."""
    if cfg.model == "mlp":
        slices = dense_slices(cfg.num_keys(), cfg.servers, cfg.workers, cfg.iterations,
                              cfg.splits)
    else:
        data = SparseLRData(cfg.features, cfg.examples, cfg.nnz, cfg.seed, cfg.zipf)
        slices = sparse_lr_slices(data, cfg.servers, cfg.workers, cfg.iterations,
                                  cfg.batch_size, cfg.splits)
    delays = straggler_delays(cfg.seed, cfg.iterations, cfg.workers, cfg.straggler_mean_s,
                              cfg.slow_workers)
    return PSSpec(cfg.servers, cfg.workers, cfg.consistency, cfg.tau, slices,
                  cfg.model == "mlp", compute_s, delays, costs, cores, van)


def predict(cfg: Any, entry: CalibrationEntry, costs: PSCosts,
            compute_s: np.ndarray | None = None, van: VanLink | None = None,
            model: str = "host") -> PSTimeline:
    """The simulated run of ``cfg`` on this machine's calibrated twin in tier ``model``
    (:mod:`simulator.host.factory`: the textbook's α-β-γ cluster, or the host's); with ``van``
    (from :func:`measure_van_link` at the run's world size) its messages take the van's
    measured times on the shared cores instead of the calibration's α, B and busy latency."""
    compute = profile_compute(cfg) if compute_s is None else compute_s
    processes = 1 + cfg.servers + cfg.workers
    cluster = local_cluster(entry, processes, model, effects=BUSY_HOST)
    if van is not None:
        cluster = van_cluster(cluster)
    return simulate(cluster, spec_for(cfg, costs, compute, entry.cores, van), trace=False)[0]


def compare(cfg: Any, calibration: Calibration | str | Path | None = None,
            costs: PSCosts | None = None, repeats: int = 1, van: VanLink | None = None
            ) -> dict[str, Any]:
    """Measure ``cfg`` on real processes (``repeats`` launches) and predict it; one record."""
    from backends.parameter_server import train

    entry = Calibration.of(calibration).entry(1 + cfg.servers + cfg.workers, "gloo")
    if costs is None:
        costs = profile_costs()
        if van is None:
            costs = replace(costs, anysource_s=measure_anysource(1 + cfg.servers + cfg.workers))
    runs = [train(cfg) for _ in range(repeats)]
    predicted = predict(cfg, entry, costs, van=van)
    measured = statistics.median(r.time_per_iteration_s for r in runs)
    return {"servers": cfg.servers, "workers": cfg.workers, "world": 1 + cfg.servers
            + cfg.workers, "model": cfg.model, "consistency": cfg.consistency, "tau": cfg.tau,
            "predicted_s": predicted.time_per_iteration_s(),
            "measured_median_s": measured,
            "rel_error": (predicted.time_per_iteration_s() - measured) / measured,
            "predicted_throughput": predicted.throughput(cfg.batch_size),
            "measured_throughput": statistics.median(r.throughput for r in runs),
            "predicted_max_staleness": int(predicted.staleness.max()),
            "measured_max_staleness": max(r.max_staleness for r in runs),
            "predicted_idle_s": predicted.idle_time_s(),
            "measured_idle_s": statistics.median(r.idle_time_s for r in runs)}


def costs_dict(costs: PSCosts) -> dict[str, float]:
    """The costs as a plain dict (µs where it helps reading)."""
    return asdict(costs)
