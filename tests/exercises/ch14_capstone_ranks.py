"""Rank programs for grading the chapter-14 capstone (``FSDP`` with prefetching) on real
processes: training next to PyTorch's own ``fully_shard``, and one step's peak memory measured
as :mod:`backends.zero_measure` measures the lab's ZeRO."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.zero_measure import step_peak_bytes
from exercises import load
from lab.models import mlp

STEPS = 3
WIDTHS = (4, 7, 5, 3)
"""Units of 35, 40 and 18 parameters: at worlds 2, 3 and 4 some unit needs padding."""
OPTIMIZERS = {"adam": (torch.optim.Adam, {"lr": 0.05, "weight_decay": 0.1}),
              "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9})}
"""Adam with L2 weight decay — plain Adam would not notice gradients off by a constant factor
(an average forgotten); and SGD with momentum."""


def fsdp_class() -> Any:
    """The ``FSDP`` under grade; a stub's ``NotImplementedError`` leaves the rank as a
    ``RuntimeError`` that says "not implemented" (see :func:`_checked`)."""
    return load("ch14_capstone_fsdp").FSDP


def _checked(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except NotImplementedError as exc:
        raise RuntimeError(f"not implemented: {exc}") from None


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s inputs and targets at ``step``: ``3 + rank`` rows, seeded."""
    g = torch.Generator().manual_seed(100 * step + rank)
    rows = 3 + rank
    return torch.randn(rows, WIDTHS[0], generator=g), torch.randn(rows, WIDTHS[-1], generator=g)


def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error, as :mod:`backends.zero_measure` trains."""
    return ((out - y) ** 2).mean()


def _fully_shard_reference(optimizer: str) -> torch.Tensor:
    """PyTorch's FSDP2 (``fully_shard`` on each Linear, then the root) trained the same way;
    every parameter, whole and flat."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    net = mlp(WIDTHS)
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    cls, kwargs = OPTIMIZERS[optimizer]
    opt = cls(net.parameters(), **kwargs)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(dist.get_rank(), step)
        loss(net(x), y).backward()
        opt.step()
    return torch.cat([p.full_tensor().detach().reshape(-1)  # type: ignore[attr-defined]
                      for p in net.parameters()])


def _train(optimizer: str) -> dict[str, Any]:
    cls, kwargs = OPTIMIZERS[optimizer]
    fsdp = fsdp_class()(mlp(WIDTHS), cls, **kwargs)
    events, records = [], []
    for step in range(STEPS):
        fsdp.events.clear()
        fsdp.comm.records.clear()
        fsdp.zero_grad()
        x, y = batch(dist.get_rank(), step)
        loss(fsdp(x), y).backward()
        fsdp.step()
        events.append(list(fsdp.events))
        records.append(list(fsdp.comm.records))
    got = torch.cat([p.reshape(-1) for p in fsdp.full_parameters().values()])
    return {"params": got, "events": events, "records": records,
            "shard_numel": [u.shard_numel for u in fsdp.units]}


def train(optimizer: str) -> dict[str, Any]:
    """Rank program: 3 steps of the FSDP under grade and of ``fully_shard`` with ``optimizer``
    on the same model and batches: the largest parameter difference, the event log and the
    collectives of every step, and the units' shard sizes."""
    mine = _checked(_train, optimizer)
    mine["max_diff"] = float((mine.pop("params") - _fully_shard_reference(optimizer)).abs().max())
    return mine


MEMORY_WIDTHS = (96, 160, 144, 128, 112)
"""Units of 15 520 to 23 184 parameters (60–93 KB each in fp32), well above the activations of
:data:`MEMORY_BATCH` rows, so the gathered units decide the peak."""
MEMORY_BATCH = 8


def peak_bytes() -> dict[bool, dict[str, int]]:
    """Rank program: without and with prefetching, the most bytes this rank holds during one
    steady-state Adam step of :func:`lab.models.mlp` of :data:`MEMORY_WIDTHS` on
    :data:`MEMORY_BATCH` rows (:func:`backends.zero_measure.step_peak_bytes`: the live
    storages kept between steps plus the allocator's highest running sum during the step),
    and the most units gathered at once during it."""
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(MEMORY_BATCH, MEMORY_WIDTHS[0], generator=g)
    y = torch.randn(MEMORY_BATCH, MEMORY_WIDTHS[-1], generator=g)

    def measure(prefetch: bool) -> dict[str, int]:
        fsdp = fsdp_class()(mlp(MEMORY_WIDTHS), torch.optim.Adam, prefetch=prefetch, lr=1e-3)

        def step() -> None:
            fsdp.zero_grad()
            loss(fsdp(x), y).backward()
            fsdp.step()

        step()  # the first step allocates Adam's state
        fsdp.gathered.clear()
        peak = step_peak_bytes(fsdp, step)  # it asks the wrapper for held_bytes() only
        return {"peak": peak, "most_gathered": max(len(g) for g in fsdp.gathered)}
    return {prefetch: _checked(measure, prefetch) for prefetch in (False, True)}
