"""FSDP predicted and measured, side by side (chapter 20).

* :func:`predict_step` — :func:`simulator.fsdp.simulate_fsdp_step` on this machine's
  calibrated twin (either tier of :func:`simulator.host.factory.local_cluster`), from a
  one-process profile of the units (:func:`lab.zero.profile_units`: forward, backward and
  optimizer seconds per unit on one core) and the optimizer step timed with every rank
  stepping its shard at once (:func:`lab.zero.optimizer_step_together_s`);
* :func:`predict_peak_bytes` — the most bytes a rank holds during one step, from the units'
  sizes and the batch only (:func:`lab.zero.unit_shapes`);
* :func:`predict_traffic_bytes` — bytes each rank sends per step
  (:func:`simulator.fsdp.traffic_bytes`);
* :func:`measure` — the real :class:`backends.fsdp.FSDP` step on ``world`` processes
  (:func:`backends.fsdp.measure.time_step`): median, p10, p90 seconds, the largest peak over
  the ranks, and PyTorch's ``fully_shard`` step timed the same way.

Seconds and bytes. No ``torch.distributed`` call here: the ranks run in
:mod:`backends.fsdp.measure`.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from backends.fsdp.measure import time_step
from backends.launch import spawn
from lab.models import mlp
from lab.zero import optimizer_step_together_s, profile_units, unit_shapes
from simulator.core.calibration import Calibration
from simulator.core.comm import SimResult
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.fsdp import FsdpConfig, model_state_bytes, simulate_fsdp_step, traffic_bytes
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster
from simulator.zero import UnitCost, shard_elements

DEFAULT = FsdpConfig()
"""PyTorch's defaults: reshard after forward, prefetch, fp32."""


def config_of(reshard: bool = True, prefetch: bool = True, mixed: bool = False) -> FsdpConfig:
    """The simulator's :class:`~simulator.fsdp.FsdpConfig` of a real configuration (``mixed``:
    bf16 parameters, fp32 reduction, as :data:`backends.fsdp.measure.BF16`)."""
    return FsdpConfig(reshard_after_forward=reshard, prefetch=prefetch,
                      param_itemsize=2 if mixed else 4)


def simulate_step(world: int, units: list[UnitCost], batch_bytes: tuple[int, int],
                  calibration: Calibration | str | Path | None = None,
                  update_together_s: float | None = None, model: str = "host",
                  config: FsdpConfig = DEFAULT, trace: bool = False) -> SimResult:
    """One step on this machine's calibrated twin of ``world`` ranks in tier ``model``, the
    ranks sharing its cores; ``update_together_s`` (the Adam step over a rank's shard with
    every rank stepping at once) replaces the one-process update times, shared by the units in
    proportion to their shards."""
    entry = Calibration.of(calibration).entry(world, "gloo")
    cluster = local_cluster(entry, world, model, effects=BUSY_HOST)
    if update_together_s is not None:
        shard = sum(shard_elements(u.numel, world) for u in units)
        units = [UnitCost(u.numel, u.forward_s, u.backward_s,
                          update_together_s * u.numel / shard, u.output_bytes) for u in units]
    return simulate_fsdp_step(cluster, units, config, *batch_bytes, cores=entry.cores,
                              update_measured_together=update_together_s is not None,
                              trace=trace)


def _batch_bytes(widths: tuple[int, ...], batch: int) -> tuple[int, int]:
    """The batch's fp32 input and the model's fp32 output, bytes."""
    return 4 * batch * widths[0], 4 * batch * widths[-1]


def predict_step(world: int, widths: tuple[int, ...], batch: int,
                 calibration: Calibration | str | Path | None = None, model: str = "host",
                 config: FsdpConfig = DEFAULT,
                 units: list[UnitCost] | None = None) -> float:
    """Predicted seconds of one step of :func:`lab.models.mlp` of ``widths`` on ``batch`` rows
    per rank (profiled here unless ``units`` are given)."""
    units = units or profile_units(mlp(widths), batch)
    together = optimizer_step_together_s(world, sum(shard_elements(u.numel, world)
                                                    for u in units))
    return simulate_step(world, units, _batch_bytes(widths, batch), calibration, together,
                         model, config).makespan_s


def predict_peak_bytes(world: int, widths: tuple[int, ...], batch: int,
                       config: FsdpConfig = DEFAULT) -> int:
    """The most bytes a rank is predicted to hold during one Adam step, from the units' sizes
    only; memory does not depend on times, so a free cluster gives it."""
    free = Cluster.homogeneous("free", Device("free", 1e18, 1e18, math.inf),
                               Topology.fully_connected(world, Link(0.0, 1e18)))
    units = unit_shapes(mlp(widths), batch)
    return max(simulate_fsdp_step(free, units, config, *_batch_bytes(widths, batch),
                                  trace=False).peak_memory_bytes)


def predict_model_state_bytes(world: int, widths: tuple[int, ...],
                              config: FsdpConfig = DEFAULT) -> int:
    """A rank's model-state bytes (:func:`simulator.fsdp.model_state_bytes`)."""
    return model_state_bytes(unit_shapes(mlp(widths), 1), world, config)


def predict_traffic_bytes(world: int, widths: tuple[int, ...],
                          config: FsdpConfig = DEFAULT) -> float:
    """Bytes each rank sends per step (:func:`simulator.fsdp.traffic_bytes`)."""
    return traffic_bytes(unit_shapes(mlp(widths), 1), world, config)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def measure(world: int, widths: tuple[int, ...], batch: int, repeats: int = 10,
            reshard: bool = True, prefetch: bool = True, mixed: bool = False,
            pytorch: bool = True) -> dict[str, Any]:
    """The real step on ``world`` processes: ``median_s``, ``p10_s``, ``p90_s``,
    ``peak_bytes`` and ``model_state_bytes`` (the largest over the ranks) and, with
    ``pytorch``, ``fully_shard``'s ``pytorch_median_s``."""
    ranks = spawn(time_step, world, mlp(widths), (widths[0], widths[-1]), batch, repeats,
                  reshard, prefetch, mixed, pytorch, timeout=60)
    samples = ranks[0]["samples_s"]
    out = {"median_s": statistics.median(samples), "p10_s": _pct(samples, 0.1),
           "p90_s": _pct(samples, 0.9), "peak_bytes": max(r["peak_bytes"] for r in ranks),
           "held_bytes": ranks[0]["held_bytes"],
           "model_state_bytes": max(r["model_state_bytes"] for r in ranks)}
    if pytorch:
        out["pytorch_median_s"] = ranks[0]["pytorch_median_s"]
    return out
