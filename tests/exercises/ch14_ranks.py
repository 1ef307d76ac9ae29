"""Rank programs for grading chapter 14's exercises on real processes."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from exercises import load

STEPS, LR = 3, 0.05
WIDTHS = (5, 7, 3)
EXTRA = 1  # a scale parameter: 5·7+7 + 7·3+3 + 1 = 67 parameters, a prime


def model() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(WIDTHS[0], WIDTHS[1]), nn.Tanh(),
                        nn.Linear(WIDTHS[1], WIDTHS[2]))
    net.register_parameter("scale", nn.Parameter(torch.ones(EXTRA)))
    return net


def forward(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return net(x) * net.scale


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(3 + rank, WIDTHS[0], generator=g), torch.randn(3 + rank, WIDTHS[2],
                                                                       generator=g)


def reference(world: int) -> torch.Tensor:
    """Plain data parallelism in one process: every rank's gradient averaged, Adam on all."""
    net = model()
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        for rank in range(world):
            x, y = batch(rank, step)
            (((forward(net, x) - y) ** 2).mean() / world).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def train_stage1() -> dict[str, Any]:
    """Train with the exercise's ``stage1_step``; report the difference from the reference and
    the size of the Adam state this rank keeps."""
    stage1_step = load("ch14_shard_optimizer").stage1_step
    world, rank = dist.get_world_size(), dist.get_rank()
    net = model()
    params = list(net.parameters())
    numel = sum(p.numel() for p in params)
    k = -(-numel // world)
    flat = torch.zeros(world * k)
    offset = 0
    with torch.no_grad():
        for p in params:
            flat[offset:offset + p.numel()].copy_(p.reshape(-1))
            p.data = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
    shard = nn.Parameter(flat[rank * k:(rank + 1) * k])
    opt = torch.optim.Adam([shard], lr=LR)
    for step in range(STEPS):
        for p in params:
            p.grad = None
        x, y = batch(rank, step)
        ((forward(net, x) - y) ** 2).mean().backward()
        grad = torch.zeros(world * k)
        offset = 0
        for p in params:
            grad[offset:offset + p.numel()].copy_(p.grad.reshape(-1))
            offset += p.numel()
        stage1_step(flat, grad, shard, opt)
    got = torch.cat([p.detach().reshape(-1) for p in params])
    state = opt.state[shard]
    return {"max_diff": float((got - reference(world)).abs().max()),
            "state_numel": [int(v.numel()) for v in state.values() if v.numel() > 1],
            "k": k}
