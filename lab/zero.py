"""ZeRO predicted and measured, side by side (book chapter 14).

* :func:`profile_units` — what each unit of :class:`backends.zero.Zero` costs on ONE process:
  the per-layer forward/backward profile of :func:`backends.pipeline.profiler.profile_layers`,
  summed per unit, and the optimizer's step over the unit's parameters (primitives only);
* :func:`predict_step` — :func:`simulator.zero.simulate_zero_step` on this machine's calibrated
  twin in either tier of :func:`simulator.host.factory.local_cluster` (the textbook's α-β-γ
  cluster, or the host's with :data:`~simulator.host.effects.BUSY_HOST`), the ranks sharing
  its cores, the optimizer step timed with every rank stepping at once
  (:func:`optimizer_step_together_s`, a primitive);
* :func:`measure_stages` — the real :class:`~backends.zero.Zero` training steps on ``world``
  processes, median step time and the model-state bytes each rank holds;
* :func:`compare_stages` — both, for each stage, with the memory the simulator predicts.

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.launch import spawn
from backends.measure import median_time
from backends.pipeline.profiler import profile_layers
from backends.zero import Zero
from lab.models import mlp, parameter_count
from simulator.core.calibration import Calibration
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster
from simulator.zero import UnitCost, model_state_bytes, simulate_zero_step


def optimizer_step_s(numel: int, repeats: int = 10, lr: float = 1e-3) -> float:
    """One ``torch.optim.Adam`` step over ``numel`` fp32 parameters on this process, s."""
    param = nn.Parameter(torch.zeros(max(numel, 1)))
    param.grad = torch.randn_like(param)
    opt = torch.optim.Adam([param], lr=lr)
    return median_time(opt.step, repeats)


def _numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)


def profile_units(model: nn.Sequential, batch: int, repeats: int = 10) -> list[UnitCost]:
    """Per-unit one-core costs of ``model`` for a local batch of ``batch`` rows.

    A unit is a layer with parameters (as :class:`backends.zero.Zero` cuts the model); a
    parameter-free layer (an activation) is charged to the unit before it. Measured with one
    intra-op thread, as every rank runs.
    """
    first = next(iter(model.children()))
    if not isinstance(first, nn.Linear):
        raise ValueError("profile_units expects a model that starts with nn.Linear")
    example = torch.randn(batch, first.in_features)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs (spawn sets OMP_NUM_THREADS=1)
    try:
        layers = profile_layers(model, example, repeats=repeats)
        updates = [optimizer_step_s(_numel(m), repeats) if _numel(m) else 0.0
                   for m in model.children()]
    finally:
        torch.set_num_threads(threads)
    units: list[UnitCost] = []
    for layer, module, update_s in zip(layers, model.children(), updates, strict=True):
        numel = _numel(module)
        if numel or not units:
            units.append(UnitCost(numel, layer.forward_s, layer.backward_s, update_s))
        else:
            last = units[-1]
            units[-1] = UnitCost(last.numel, last.forward_s + layer.forward_s,
                                 last.backward_s + layer.backward_s, last.update_s)
    return units


def _slowest_rank_times(fn: Any, repeats: int, warmup: int = 2) -> list[float]:
    """Rank program piece: every rank runs ``fn`` at the same moment (a barrier first); the
    slowest rank's seconds of each repeat after the warm-ups (the step ends with it)."""
    samples = []
    for k in range(warmup + repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if k >= warmup:
            samples.append(float(elapsed))
    return samples


def _adam_together(numel: int, repeats: int) -> float:
    """Rank program: every rank steps Adam over ``numel`` parameters at the same moment; the
    median over repeats of the slowest rank's time, s."""
    param = nn.Parameter(torch.zeros(max(numel, 1)))
    param.grad = torch.randn_like(param)
    opt = torch.optim.Adam([param], lr=1e-3)
    return statistics.median(_slowest_rank_times(opt.step, repeats))


def optimizer_step_together_s(world: int, numel: int, repeats: int = 10) -> float:
    """One Adam step over ``numel`` fp32 parameters with ``world`` processes stepping at once,
    s — a primitive: on a small host the update is bound by memory bandwidth, which the ranks
    share (on this 2-core VM, 4.2M parameters take 6.9 ms alone and up to 34 ms four at a
    time), so a one-process profile cannot say what it costs inside a step."""
    return float(spawn(_adam_together, world, numel, repeats, timeout=60)[0])


def predict_step(world: int, stage: int, units: list[UnitCost],
                 calibration: Calibration | str | Path | None = None,
                 update_together_s: float | None = None, model: str = "host") -> float:
    """Predicted seconds of one step on this machine's calibrated twin of ``world`` ranks, in
    tier ``model`` (``calibration``: the file read once, or its path, default the user's).

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
        units = [UnitCost(u.numel, u.forward_s, u.backward_s,
                          update_together_s * u.numel / per_rank) for u in units]
    return simulate_zero_step(cluster, units, stage, cores=entry.cores,
                              update_measured_together=update_together_s is not None
                              ).makespan_s


def _time_stages(stages: tuple[int, ...], widths: tuple[int, ...], batch: int, repeats: int
                 ) -> dict[int, dict[str, Any]]:
    """Rank program: for each stage, train ``repeats`` timed steps (after 2 warm-ups); the step
    times (the slowest rank's, each step) and the model-state bytes this rank holds."""
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(batch, widths[0], generator=g), torch.randn(batch, widths[-1], generator=g)
    out = {}
    for stage in stages:
        zero = Zero(mlp(widths), torch.optim.Adam, stage=stage, lr=1e-3)

        def step(zero: Zero = zero) -> None:
            zero.zero_grad()
            ((zero(x) - y) ** 2).mean().backward()
            zero.step()

        out[stage] = {"samples_s": _slowest_rank_times(step, repeats),
                      "model_states": zero.model_states()}
        del zero
    return out


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
    """Each stage's real step on ``world`` processes (one launch for all): median/p10/p90
    seconds and rank 0's model-state bytes."""
    got = spawn(_time_stages, world, tuple(stages), widths, batch, repeats, timeout=60)[0]
    out = {}
    for stage, res in got.items():
        samples = sorted(res["samples_s"])

        def pct(q: float, samples: list[float] = samples) -> float:
            return float(samples[min(len(samples) - 1, int(q * len(samples)))])

        out[stage] = {"median_s": statistics.median(samples), "p10_s": pct(0.1),
                      "p90_s": pct(0.9), "model_states": res["model_states"]}
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
