"""Rank programs for the ZeRO tests: each runs every case in one process group and returns plain
numbers, so one spawn per world size covers the whole matrix."""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.zero import Zero

STEPS = 3
LR = 0.05


class Tied(nn.Module):
    """Two layers share one weight (tied weights, as a language model's embedding and output)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(6, 5)
        self.a = nn.Linear(5, 5, bias=False)
        self.b = nn.Linear(5, 5)
        self.b.weight = self.a.weight
        self.out = nn.Linear(5, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.b(torch.tanh(self.a(torch.tanh(self.inp(x))))))


class WithUnused(nn.Module):
    """A branch that never takes part in the loss (its gradients never arrive)."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Sequential(nn.Linear(6, 7), nn.Tanh(), nn.Linear(7, 6))
        self.unused = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def mlp(seed: int = 0, widths: tuple[int, ...] = (6, 7, 5, 6)) -> nn.Module:
    """An MLP whose unit sizes (7·6+7 = 49, 40, 36) divide by no world size above 1."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


MODELS = {"mlp": mlp, "tied": lambda: (torch.manual_seed(0), Tied())[1],
          "unused": lambda: (torch.manual_seed(0), WithUnused())[1]}


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s data at ``step`` (different on every rank and step)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(4 + rank, 6, generator=g), torch.randn(4 + rank, 6, generator=g)


def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out - y) ** 2).mean()


def reference(model_name: str, world: int, optimizer: str) -> dict[str, torch.Tensor]:
    """Plain data parallelism in one process: the average of every rank's gradient."""
    model = MODELS[model_name]()
    opt = _optimizer(optimizer, list(model.parameters()))
    for step in range(STEPS):
        opt.zero_grad()
        for rank in range(world):
            x, y = batch(rank, step)
            (loss_fn(model(x), y) / world).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _optimizer(name: str, params: list[Any]) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=LR)
    return torch.optim.SGD(params, lr=LR, momentum=0.9)


def ours(model_name: str, stage: int, optimizer: str) -> tuple[dict[str, torch.Tensor], dict]:
    model = MODELS[model_name]()
    zero = Zero(model, torch.optim.Adam if optimizer == "adam" else torch.optim.SGD, stage=stage,
                lr=LR, **({} if optimizer == "adam" else {"momentum": 0.9}))
    rank = dist.get_rank()
    for step in range(STEPS):
        zero.zero_grad()
        x, y = batch(rank, step)
        loss_fn(zero(x), y).backward()
        zero.step()
    return zero.full_parameters(), zero.model_states()


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys(), (sorted(a), sorted(b))
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def run_matrix() -> dict[str, Any]:
    """Every (model, stage, optimizer) case against plain data parallelism."""
    world = dist.get_world_size()
    results: dict[str, Any] = {}
    for model_name in MODELS:
        for stage in (0, 1, 2, 3):
            for optimizer in ("adam", "momentum"):
                key = f"{model_name}/stage{stage}/{optimizer}"
                if model_name == "tied" and stage == 3:
                    try:
                        ours(model_name, stage, optimizer)
                        results[key] = "no error"
                    except ValueError as exc:
                        results[key] = str(exc)
                    continue
                got, _ = ours(model_name, stage, optimizer)
                results[key] = max_diff(got, reference(model_name, world, optimizer))
    return results


def run_memory(widths: tuple[int, ...]) -> dict[int, dict[str, int]]:
    """Model-state bytes on this rank after a step, per stage (fp32 Adam)."""
    out = {}
    rank = dist.get_rank()
    for stage in (0, 1, 2, 3):
        zero = Zero(mlp(0, widths), torch.optim.Adam, stage=stage, lr=LR)
        x = torch.randn(8, widths[0])
        loss_fn(zero(x), torch.zeros(8, widths[-1]) + rank).backward()
        zero.step()
        out[stage] = zero.model_states()
    return out


def run_builtin(stage: int) -> float:
    """Ours against PyTorch's: DDP + ZeroRedundancyOptimizer (stage 1), fully_shard (stage 3).
    Returns the largest parameter difference after training."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = dist.get_rank()
    model = mlp()
    if stage == 1:
        ddp = DDP(model)
        opt: Any = ZeroRedundancyOptimizer(ddp.parameters(), torch.optim.Adam, lr=LR)
        forward: Any = ddp
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        forward = model
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(rank, step)
        loss_fn(forward(x), y).backward()
        opt.step()
    if stage == 1:
        theirs = {k: v.detach().clone() for k, v in model.named_parameters()}
    else:
        theirs = {k: v.full_tensor().detach().clone() for k, v in model.named_parameters()}
    got, _ = ours("mlp", stage, "adam")
    return max_diff(got, theirs)


MEMORY_WIDTHS = (64, 96, 33, 64)
"""12,447 parameters: not a multiple of 3 or 4."""


def run_all() -> dict[str, Any]:
    """The whole test matrix in one process group: parity with plain data parallelism, with
    PyTorch's own, and the measured model states."""
    return {"matrix": run_matrix(),
            "builtin": {stage: run_builtin(stage) for stage in (1, 3)},
            "memory": run_memory(MEMORY_WIDTHS)}
