"""Rank program for grading exercise 12.3 (the g operator) on real processes."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from exercises import load


def _inputs(rank: int, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(10 + rank),
                       dtype=torch.float64)


def grade_g() -> dict[str, Any]:
    """Max |Δ| of g's forward (vs the sum of every rank's input), backward (vs the incoming
    gradient) and of a row-parallel linear built on it (vs the unsharded linear); ``todo``
    while the exercise is a stub."""
    ex = load("ch12_g_operator")
    world, rank = dist.get_world_size(), dist.get_rank()
    shape = (3, 5)
    try:
        x = _inputs(rank, shape).requires_grad_()
        y = ex.g(x)
        grad_out = _inputs(100 + rank, shape)
        y.backward(grad_out)
    except NotImplementedError as err:
        return {"todo": str(err)}
    want = sum(_inputs(r, shape) for r in range(world))
    out: dict[str, Any] = {"forward": float((y.detach() - want).abs().max()),
                           "input_unchanged": float((x.detach() - _inputs(rank, shape)
                                                     ).abs().max()),
                           "backward": float((x.grad - grad_out).abs().max())}

    gen = torch.Generator().manual_seed(7)
    n_in, n_out = 4 * world, 6
    x_full = torch.randn(2, 3, n_in, generator=gen, dtype=torch.float64, requires_grad=True)
    w_full = torch.randn(n_out, n_in, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(n_out, generator=gen, dtype=torch.float64)
    ref = F.linear(x_full, w_full, bias)
    ref.sum().backward()
    x_mine = x_full.detach().chunk(world, -1)[rank].clone().requires_grad_()
    w_mine = w_full.detach().chunk(world, 1)[rank].clone().requires_grad_()
    y = ex.row_parallel_linear(x_mine, w_mine, bias)
    y.sum().backward()
    assert x_full.grad is not None and w_full.grad is not None
    out["row_parallel_output"] = float((y.detach() - ref.detach()).abs().max())
    out["row_parallel_input_grad"] = float(
        (x_mine.grad - x_full.grad.chunk(world, -1)[rank]).abs().max())
    out["row_parallel_weight_grad"] = float(
        (w_mine.grad - w_full.grad.chunk(world, 1)[rank]).abs().max())
    return out
