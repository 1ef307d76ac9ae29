"""FSDP predicted and measured, side by side (chapter 20).

* :func:`profile_units` — what each unit costs inside a step of ``world`` ranks, from a
  profile of our FSDP wrapper in ONE process (:func:`backends.fsdp.profile.unit_costs`):
  forward and backward seconds on one core with the hooks' bookkeeping in them, less what
  of the gathers' and reduce-scatters' local work the simulator prices as messages at
  ``world`` ranks;
* :func:`predict_step` — :func:`simulator.fsdp.simulate_fsdp_step` on this machine's
  calibrated twin (either tier of :func:`simulator.host.factory.local_cluster`), from
  :func:`profile_units` and the optimizer step timed with every rank stepping its shard at
  once (:func:`lab.zero.optimizer_step_together_s`);
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

import torch
from torch import nn

from backends.fsdp.measure import time_step
from backends.fsdp.profile import unit_costs
from backends.launch import spawn
from lab.models import mlp
from lab.zero import optimizer_step_s, optimizer_step_together_s, unit_shapes
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


def profile_units(model: nn.Sequential, batch: int, world: int, config: FsdpConfig = DEFAULT,
                  repeats: int = 10) -> list[UnitCost]:
    """Each unit's one-core costs inside a step of ``world`` ranks, ``batch`` rows each.

    Why through the wrapper: a profile of the plain modules (:func:`lab.zero.profile_units`)
    misses FSDP's own work per unit — re-allocating and viewing the flat buffer, freeing it,
    the hooks, copying the gradients into the flat buffer — which for small units is a
    sizable share of their compute. So the units are timed inside
    :class:`backends.fsdp.FSDP` run by ONE process (:func:`backends.fsdp.profile.unit_costs`,
    in ``config``'s resharding, prefetching and dtypes), where the all-gather sends nothing
    and the reduce-scatter's ring has no step. The profile never sees a step of two or more
    ranks.

    Why less some of it: at world 1 a gather copies the whole unit into its flat buffer and
    the reduce-scatter divides and accumulates the whole unit; at ``world`` ranks each
    touches only this rank's ``1/world`` shard, the rest arrives as messages that the
    simulator prices. So ``(1 − 1/world)`` of each gather's copy (``gather_copy_s``, charged
    to the span that issued the gather) and of the unit's reduce arithmetic
    (``reduce_local_s``, its backward) is taken off. ``update_s``: one Adam step over the
    unit's parameters on one core (:func:`lab.zero.optimizer_step_s`); ``output_bytes`` in
    fp32 from the shapes (:func:`lab.zero.unit_shapes`). Seconds and bytes.
    """
    first = next(iter(model.children()))
    if not isinstance(first, nn.Linear):
        raise ValueError("profile_units expects a model that starts with nn.Linear")
    costs = spawn(unit_costs, 1, model, first.in_features, batch, config.reshard_after_forward,
                  config.prefetch, config.param_itemsize == 2, repeats, timeout=120)[0]
    shapes = unit_shapes(model, batch)
    if [u.numel for u in shapes] != [c["numel"] for c in costs]:
        raise ValueError("the wrapper's units are not the model's layers with parameters")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs (spawn sets OMP_NUM_THREADS=1)
    try:
        updates = [optimizer_step_s(c["numel"], repeats) for c in costs]
    finally:
        torch.set_num_threads(threads)
    return [UnitCost(c["numel"], forward_s, backward_s, update_s, shape.output_bytes)
            for c, (forward_s, backward_s), update_s, shape
            in zip(costs, at_world(costs, world), updates, shapes, strict=True)]


def at_world(costs: list[dict[str, Any]], world: int) -> list[tuple[float, float]]:
    """Each unit's ``(forward_s, backward_s)`` inside a step of ``world`` ranks, from the
    one-process profile ``costs`` (:func:`backends.fsdp.profile.unit_costs`): its spans less
    ``(1 − 1/world)`` of the gathers' local copies issued in them (``gather_copy_s`` of each
    unit in ``forward_gathers``/``backward_gathers``) and, in backward, of the unit's own
    reduce arithmetic (``reduce_local_s``) — the part that at ``world`` ranks arrives as
    messages. Seconds."""
    remote = 1 - 1 / world
    copy_s = [c["gather_copy_s"] for c in costs]
    return [(c["forward_s"] - remote * math.fsum(copy_s[j] for j in c["forward_gathers"]),
             c["backward_s"] - remote * (math.fsum(copy_s[j] for j in c["backward_gathers"])
                                         + c["reduce_local_s"]))
            for c in costs]


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
    per rank (the units profiled here, :func:`profile_units`, unless ``units`` are given)."""
    units = units or profile_units(mlp(widths), batch, world, config)
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
