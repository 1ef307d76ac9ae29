"""ZeRO predicted and measured, side by side (book chapter 14).

* :func:`profile_units` — what each unit of :class:`backends.zero.Zero` costs on ONE process:
  the per-layer forward/backward profile of :func:`backends.pipeline.profiler.profile_layers`,
  summed per unit, and the optimizer's step over the unit's parameters (primitives only);
* :func:`predict_step` — :func:`simulator.zero.simulate_zero_step` on this machine's calibrated
  twin in either tier of :func:`simulator.host.factory.local_cluster` (the textbook's α-β-γ
  cluster, or the host's with :data:`~simulator.host.effects.BUSY_HOST`), the ranks sharing
  its cores, the optimizer step timed with every rank stepping at once
  (:func:`optimizer_step_together_s`, a primitive);
* :func:`predict_peak_bytes` — the most bytes a rank holds during one step, from the model's
  parameter counts and shapes only (:func:`simulator.zero.simulate_zero_step`'s memory);
* :func:`measure_stages` — the real :class:`~backends.zero.Zero` training steps on ``world``
  processes (rank programs: :mod:`backends.zero_measure`), median step time, the model-state
  bytes a rank holds and the largest peak over the ranks;
* :func:`compare_stages` — both, for each stage, with the memory the simulator predicts;
* :func:`step_timelines` — one step predicted and measured as timelines.

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from backends.launch import spawn
from backends.measure import median_time
from backends.pipeline.profiler import profile_layers
from backends.zero_measure import adam_together, time_stages, traced_step
from lab.models import mlp, parameter_count
from simulator.core.calibration import Calibration
from simulator.core.comm import SimResult
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster
from simulator.zero import UnitCost, model_state_bytes, simulate_zero_step

__all__ = ["StagePoint", "compare_stages", "measure_stages", "mlp", "optimizer_step_s",
           "optimizer_step_together_s", "parameter_count", "predict_peak_bytes",
           "predict_step", "profile_units", "simulate_step", "step_timelines", "unit_shapes"]


def optimizer_step_s(numel: int, repeats: int = 10, lr: float = 1e-3) -> float:
    """One ``torch.optim.Adam`` step over ``numel`` fp32 parameters on this process, s."""
    param = nn.Parameter(torch.zeros(max(numel, 1)))
    param.grad = torch.randn_like(param)
    opt = torch.optim.Adam([param], lr=lr)
    return median_time(opt.step, repeats)


def _numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)


def _first_linear(model: nn.Sequential) -> nn.Linear:
    first = next(iter(model.children()))
    if not isinstance(first, nn.Linear):
        raise ValueError("profile_units expects a model that starts with nn.Linear")
    return first


def _units(layers: list[UnitCost]) -> list[UnitCost]:
    """Per-layer costs grouped into :class:`backends.zero.Zero`'s units: a layer with
    parameters starts a unit, a parameter-free layer (an activation) is charged to the unit
    before it (its times added, its output the unit's output)."""
    units: list[UnitCost] = []
    for layer in layers:
        if layer.numel or not units:
            units.append(layer)
        else:
            last = units[-1]
            units[-1] = replace(last, forward_s=last.forward_s + layer.forward_s,
                                backward_s=last.backward_s + layer.backward_s,
                                output_bytes=layer.output_bytes)
    return units


def profile_units(model: nn.Sequential, batch: int, repeats: int = 10) -> list[UnitCost]:
    """Per-unit one-core costs of ``model`` for a local batch of ``batch`` rows, with each
    unit's output bytes (:attr:`~simulator.zero.UnitCost.output_bytes`).

    A unit is a layer with parameters (as :class:`backends.zero.Zero` cuts the model); a
    parameter-free layer (an activation) is charged to the unit before it. Measured with one
    intra-op thread, as every rank runs.
    """
    example = torch.randn(batch, _first_linear(model).in_features)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs (spawn sets OMP_NUM_THREADS=1)
    try:
        layers = profile_layers(model, example, repeats=repeats)
        updates = [optimizer_step_s(_numel(m), repeats) if _numel(m) else 0.0
                   for m in model.children()]
    finally:
        torch.set_num_threads(threads)
    return _units([UnitCost(_numel(module), layer.forward_s, layer.backward_s, update_s,
                            layer.output_bytes or 0)
                   for layer, module, update_s in zip(layers, model.children(), updates,
                                                      strict=True)])


def unit_shapes(model: nn.Sequential, batch: int) -> list[UnitCost]:
    """``model``'s units with their sizes only — parameters and output bytes for a batch of
    ``batch`` rows, from the layers' shapes (one forward without gradients), no times."""
    h = torch.zeros(batch, _first_linear(model).in_features)
    layers = []
    with torch.no_grad():
        for module in model.children():
            h = module(h)
            layers.append(UnitCost(_numel(module), 0.0, 0.0, 0.0, h.numel() * h.element_size()))
    return _units(layers)


def optimizer_step_together_s(world: int, numel: int, repeats: int = 10) -> float:
    """One Adam step over ``numel`` fp32 parameters with ``world`` processes stepping at once,
    s — a primitive: on a small host the update is bound by memory bandwidth, which the ranks
    share (on this 2-core VM, 4.2M parameters take 6.9 ms alone and up to 34 ms four at a
    time), so a one-process profile cannot say what it costs inside a step."""
    return float(spawn(adam_together, world, numel, repeats, timeout=60)[0])


def simulate_step(world: int, stage: int, units: list[UnitCost],
                  calibration: Calibration | str | Path | None = None,
                  update_together_s: float | None = None, model: str = "host",
                  trace: bool = False) -> SimResult:
    """One step simulated on this machine's calibrated twin of ``world`` ranks, in tier
    ``model`` (``calibration``: the file read once, or its path, default the user's): its
    makespan, each rank's peak memory and, with ``trace``, its timeline.

    ``update_together_s``: the optimizer step over this stage's elements per rank (all of them
    at stage 0, ``⌈Ψ/N_d⌉`` otherwise) measured with every rank stepping at once
    (:func:`optimizer_step_together_s`); it replaces the one-process update times, shared by
    the units in proportion to their size. ``None``: the one-process times on shared cores.
    """
    entry = Calibration.of(calibration).entry(world, "gloo")
    cluster = local_cluster(entry, world, model, effects=BUSY_HOST)
    if update_together_s is not None:
        total = sum(u.numel for u in units)
        per_rank = total if stage == 0 else -(-total // world)
        units = [replace(u, update_s=update_together_s * u.numel / per_rank) for u in units]
    return simulate_zero_step(cluster, units, stage, cores=entry.cores,
                              update_measured_together=update_together_s is not None,
                              trace=trace)


def predict_step(world: int, stage: int, units: list[UnitCost],
                 calibration: Calibration | str | Path | None = None,
                 update_together_s: float | None = None, model: str = "host") -> float:
    """Predicted seconds of one step (:func:`simulate_step`'s makespan)."""
    return simulate_step(world, stage, units, calibration, update_together_s,
                         model).makespan_s


def predict_peak_bytes(world: int, stage: int, model: nn.Sequential, batch: int) -> int:
    """The most bytes a rank is predicted to hold during one Adam step of ``model`` at ZeRO
    ``stage`` on ``world`` ranks, ``batch`` rows each: :func:`simulator.zero.zero_step`'s
    memory (model states per stage, the stage's gathered units and gradient buffers,
    activations, the optimizer's temporaries) from the units' sizes only
    (:func:`unit_shapes`). Memory does not depend on the network or the times, so a free
    cluster of ``world`` ranks gives it."""
    free = Cluster.homogeneous("free", Device("free", 1e18, 1e18, math.inf),
                               Topology.fully_connected(world, Link(0.0, 1e18)))
    return max(simulate_zero_step(free, unit_shapes(model, batch), stage,
                                  trace=False).peak_memory_bytes)


@dataclass(frozen=True)
class StagePoint:
    """One stage at one world size: predicted and measured step time and model states."""

    world: int
    stage: int
    params: int
    predicted_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float
    predicted_states: dict[str, int]
    measured_states: dict[str, int]

    @property
    def rel_error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted_s - self.measured_median_s) / self.measured_median_s


def measure_stages(world: int, stages: tuple[int, ...], widths: tuple[int, ...], batch: int,
                   repeats: int = 10) -> dict[int, dict[str, Any]]:
    """Each stage's real step on ``world`` processes (one launch for all,
    :func:`backends.zero_measure.time_stages`): median/p10/p90 seconds, rank 0's model-state
    bytes and ``peak_bytes``, the largest over the ranks of the most bytes a rank held
    during one step (:func:`backends.zero_measure.step_peak_bytes`)."""
    ranks = spawn(time_stages, world, tuple(stages), mlp(widths), (widths[0], widths[-1]),
                  batch, repeats, timeout=60)
    out = {}
    for stage, res in ranks[0].items():
        samples = sorted(res["samples_s"])

        def pct(q: float, samples: list[float] = samples) -> float:
            return float(samples[min(len(samples) - 1, int(q * len(samples)))])

        out[stage] = {"median_s": statistics.median(samples), "p10_s": pct(0.1),
                      "p90_s": pct(0.9), "model_states": res["model_states"],
                      "peak_bytes": max(int(r[stage]["peak_bytes"]) for r in ranks)}
    return out


def compare_stages(world: int, widths: tuple[int, ...], batch: int, repeats: int = 10,
                   stages: tuple[int, ...] = (0, 1, 2, 3),
                   calibration: Calibration | str | Path | None = None) -> list[StagePoint]:
    """Predict (from a one-process profile and the calibration, host tier) and measure each
    stage."""
    calibration = Calibration.of(calibration)
    units = profile_units(mlp(widths), batch)
    params = parameter_count(widths)
    together = {n: optimizer_step_together_s(world, n)
                for n in {params if stage == 0 else -(-params // world) for stage in stages}}
    measured = measure_stages(world, stages, widths, batch, repeats)
    return [StagePoint(world, stage, params,
                       predict_step(world, stage, units, calibration, together[
                           params if stage == 0 else -(-params // world)]),
                       measured[stage]["median_s"], measured[stage]["p10_s"],
                       measured[stage]["p90_s"],
                       model_state_bytes(params, stage, world, "fp32", "adam").as_dict(),
                       measured[stage]["model_states"])
            for stage in stages]


def step_timelines(world: int, stage: int, widths: tuple[int, ...], batch: int,
                   calibration: Calibration | str | Path | None = None, model: str = "host"
                   ) -> tuple[Trace, Trace]:
    """One step of stage ``stage`` as timelines (s, each starting at 0): predicted as the
    comparison predicts it (:func:`simulate_step` in tier ``model``, from the one-process
    profile and the update timed with every rank at once), and measured
    (:func:`backends.zero_measure.traced_step`)."""
    units = profile_units(mlp(widths), batch)
    params = parameter_count(widths)
    together = optimizer_step_together_s(world, params if stage == 0 else -(-params // world))
    predicted = simulate_step(world, stage, units, calibration, together, model, trace=True)
    measured = spawn(traced_step, world, stage, mlp(widths), (widths[0], widths[-1]), batch,
                     timeout=60)[0]
    return predicted.trace.shifted(), Trace.from_records(measured).shifted()
