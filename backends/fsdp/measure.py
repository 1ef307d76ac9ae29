"""Rank programs of the FSDP twin's checks and measurements (chapter 20), spawned one per
process (``backends.launch.spawn``):

* :func:`parity` — our :class:`~backends.fsdp.FSDP` and PyTorch's own
  ``torch.distributed.fsdp.fully_shard`` (each unit wrapped, then the root) trained side by
  side on the same batches: the largest parameter difference after the steps;
* :func:`time_step` — our step timed (the slowest rank's seconds,
  :func:`backends.zero_measure.slowest_rank_times`) and its peak bytes over one step
  (:func:`backends.zero_measure.step_peak_bytes`: live storages kept between steps plus the
  allocator's highest running sum during the step), and ``fully_shard``'s step timed the
  same way, for the speed ratio.

Both train mean squared error; ``mixed`` selects bf16 parameters with fp32 reduction.
"""

from __future__ import annotations

import copy
import statistics
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device
from backends.fsdp.fsdp import FSDP
from backends.fsdp.unit import MixedPrecision
from backends.zero_measure import slowest_rank_times, step_peak_bytes

OPTIMIZERS: dict[str, tuple[type[torch.optim.Optimizer], dict[str, Any]]] = {
    "adam": (torch.optim.Adam, {"lr": 0.05, "weight_decay": 0.1}),
    "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
}
"""Adam with L2 weight decay (plain Adam would hide a gradient off by a constant factor) and
SGD with momentum."""

BF16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
"""bf16 parameters and compute, fp32 reduction."""


def _units(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules()
            if any(p.requires_grad for p in m.parameters(recurse=False))]


def fully_shard_model(model: nn.Module, mixed: bool, reshard_after_forward: bool,
                      group: Any = None) -> nn.Module:
    """``model`` under PyTorch's FSDP2: ``fully_shard`` on each unit (as :class:`FSDP` cuts
    it), then on the root, on a 1-D mesh of ``group`` (default: the world)."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = (DeviceMesh.from_group(group, device().type) if group is not None
            else init_device_mesh(device().type, (dist.get_world_size(),)))
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if mixed else MixedPrecisionPolicy())
    for unit in _units(model):
        fully_shard(unit, mesh=mesh, mp_policy=policy,
                    reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
    return model


def batch(features: tuple[int, int], rows: int, step: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's inputs and targets at ``step``: ``rows + rank`` rows (ranks differ), seeded."""
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(1000 * step + rank)
    n = rows + rank
    return (torch.randn(n, features[0], generator=g).to(device()),
            torch.randn(n, features[1], generator=g).to(device()))


def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean squared error of ``out`` (in fp32) against ``y``."""
    return ((out.float() - y) ** 2).mean()


def backward(value: torch.Tensor) -> None:
    """``value.backward()``: called on ``loss(model(x), y)``, so that nothing but the loss
    holds the model's output (which its backward does not need)."""
    value.backward()  # type: ignore[no-untyped-call]


def parity(model: nn.Module, features: tuple[int, int], cases: list[dict[str, Any]],
           steps: int = 3, rows: int = 3, group: Any = None) -> list[float]:
    """Rank program: for each case (``optimizer``, ``mixed``, ``reshard_after_forward``,
    ``prefetch``) ``steps`` steps of ours and of ``fully_shard`` from the same ``model`` on
    the ranks of ``group`` (default: the world); the largest absolute difference of any
    parameter afterwards, per case."""
    out = []
    for case in cases:
        cls, kwargs = OPTIMIZERS[case["optimizer"]]
        ours = FSDP(copy.deepcopy(model), cls, reshard_after_forward=case["reshard"],
                    prefetch=case.get("prefetch", True),
                    mixed_precision=BF16 if case["mixed"] else None, group=group, **kwargs)
        theirs = fully_shard_model(copy.deepcopy(model), case["mixed"], case["reshard"], group)
        opt = cls(theirs.parameters(), **kwargs)
        for step in range(steps):
            x, y = batch(features, rows, step)
            ours.zero_grad()
            backward(loss(ours(x), y))
            ours.step()
            opt.zero_grad()
            backward(loss(theirs(x), y))
            opt.step()
        got = ours.full_parameters()
        want = {n: p.full_tensor().detach()  # type: ignore[attr-defined]
                for n, p in theirs.named_parameters()}
        out.append(max(float((got[n] - want[n]).abs().max()) for n in want))
    return out


def gather_log(model: nn.Module, features: tuple[int, int], reshard: bool, prefetch: bool
               ) -> list[tuple[str, int]]:
    """Rank program: one step's log of all-gathers issued and unit computes begun
    (:attr:`FSDP.log`), after a first step."""
    fsdp = FSDP(copy.deepcopy(model), torch.optim.SGD, reshard_after_forward=reshard,
                prefetch=prefetch, lr=0.1)
    x, y = batch(features, 3, 0)
    for _ in range(2):
        fsdp.log.clear()
        fsdp.zero_grad()
        backward(loss(fsdp(x), y))
        fsdp.step()
    return list(fsdp.log)


def time_step(model: nn.Module, features: tuple[int, int], rows: int, repeats: int,
              reshard: bool = True, prefetch: bool = True, mixed: bool = False,
              pytorch: bool = True) -> dict[str, Any]:
    """Rank program: ``repeats`` timed Adam steps of ours (after 2 warm-ups; the slowest
    rank's seconds each), this rank's peak bytes over one more step, and — with ``pytorch``
    — ``fully_shard``'s steps timed the same way. Every rank trains ``rows`` rows."""
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(rows, features[0], generator=g).to(device())
    y = torch.randn(rows, features[1], generator=g).to(device())
    ours = FSDP(copy.deepcopy(model), torch.optim.Adam, reshard_after_forward=reshard,
                prefetch=prefetch, mixed_precision=BF16 if mixed else None, lr=1e-3)

    def step() -> None:
        ours.zero_grad()
        backward(loss(ours(x), y))
        ours.step()

    samples = slowest_rank_times(step, repeats)
    out: dict[str, Any] = {"samples_s": samples, "median_s": statistics.median(samples),
                           "held_bytes": ours.held_bytes(),
                           "model_state_bytes": ours.model_states(),
                           "peak_bytes": step_peak_bytes(cast(Any, ours), step)}
    if pytorch:
        theirs = fully_shard_model(copy.deepcopy(model), mixed, reshard)
        opt = torch.optim.Adam(theirs.parameters(), lr=1e-3)

        def theirs_step() -> None:
            opt.zero_grad()
            backward(loss(theirs(x), y))
            opt.step()

        out["pytorch_samples_s"] = slowest_rank_times(theirs_step, repeats)
        out["pytorch_median_s"] = statistics.median(out["pytorch_samples_s"])
    return out
