"""Rank program for tests/backends/test_zero_bubble.py: every zero-bubble case in one launch.

For each schedule, our runtime and PyTorch's schedule each run one step from the same model;
their gradients are compared with one-process training on this rank, and the measured peak
activation bytes with the schedule's prediction."""

import torch
import torch.distributed as dist
from torch import nn

from backends.pipeline.models import mlp
from backends.pipeline.partition import layer_ranges, partition
from backends.pipeline.zero_bubble import ZeroBubblePipeline, stages_per_rank
from backends.pipeline.zero_bubble_builtin import BuiltinZeroBubble, supported
from simulator.pipeline.schedules.split_backward import peak_activation_bytes, stage_of

WIDTH, HIDDEN, ROWS = 5, 7, 3
"""Odd sizes: width 5, hidden 7, 3 rows per micro-batch."""


def microbatches(schedule: str, world: int) -> int:
    """An awkward m: odd for ZB-H1, fewer than 2p − 1 for ZB-V (phantom micro-batches) when
    the world allows, the minimum 2p for DualPipe-V."""
    return {"zb_h1": 2 * world - 1, "zbv": max(1, 2 * world - 3),
            "dualpipev": 2 * world}[schedule]


def _grads(modules, owned):
    return {k: [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                for p in modules[k].parameters()] for k in owned}


def _diff(a, b):
    return max(float((x - y).abs().max()) for k in a for x, y in zip(a[k], b[k], strict=True))


def one_case(schedule: str) -> dict:
    world, rank = dist.get_world_size(), dist.get_rank()
    chunks = stages_per_rank(schedule)
    m = microbatches(schedule, world)
    stages = world * chunks
    balance = [2 * world // stages] * stages
    x = torch.randn(m * ROWS, WIDTH, generator=torch.Generator().manual_seed(1))
    t = torch.randn(m * ROWS, WIDTH, generator=torch.Generator().manual_seed(2))

    reference = mlp(2 * world, WIDTH, HIDDEN, seed=3)  # one process, whole batch
    nn.functional.mse_loss(reference(x), t).backward()
    ref_parts = partition(reference, balance)

    pipe = ZeroBubblePipeline(mlp(2 * world, WIDTH, HIDDEN, seed=3), balance, m, schedule, x)
    loss = pipe.step(x if 0 in pipe.modules else None, t if stages - 1 in pipe.modules else None)
    ours = _grads(pipe.modules, pipe.own)
    ref = _grads(dict(enumerate(ref_parts)), pipe.own)
    placement = "loop" if chunks == 1 else "v"
    predicted = peak_activation_bytes(pipe.actions, rank, world, pipe.activation_bytes,
                                      placement)
    out = {"m": m, "vs_one_process": _diff(ours, ref), "loss": loss,
           "ref_loss": float(nn.functional.mse_loss(reference(x), t)),
           "measured_peak": pipe.peak_activation_bytes, "predicted_peak": predicted,
           "stages": [stage_of(rank, c, world, placement) for c in range(chunks)],
           "layers": [list(layer_ranges(balance)[k]) for k in pipe.own]}
    dist.barrier()
    if supported(schedule, world, m):
        theirs = BuiltinZeroBubble(partition(mlp(2 * world, WIDTH, HIDDEN, seed=3), balance),
                                   rank, world, m, schedule)
        theirs.step(x if theirs.first else None, t if theirs.last else None)
        out["vs_pytorch"] = _diff(ours, _grads(theirs.modules, pipe.own))
    dist.barrier()
    return out


def run_all() -> dict:
    """Rank function: every schedule at this world size."""
    return {name: one_case(name) for name in ("zb_h1", "zbv", "dualpipev")}
