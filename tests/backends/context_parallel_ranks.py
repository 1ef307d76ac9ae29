"""Rank programs of tests/backends/test_context_parallel.py (spawned by name)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from backends.context_parallel import (
    ring_attention,
    sequence_shard,
    ulysses_attention,
    zigzag_shard,
)

CASES = [  # (batch, heads, seq per 2·world chunk, dim, causal)
    (1, 3, 3, 5, True), (2, 4, 1, 4, False), (1, 4, 2, 7, True), (2, 1, 5, 3, False)]


def _reference(shape: tuple[int, ...], causal: bool, seed: int
               ) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """Whole-sequence q, k, v, dout (fp64) and single-process SDPA's output and gradients."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, dout = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(4))
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    out.backward(dout)
    return [q, k, v], dout, [t.grad for t in leaves], out.detach()


def _errors(kind: str, shape: tuple[int, ...], causal: bool, seed: int) -> float:
    """Largest |difference| of this rank's output and q, k, v gradients from the reference."""
    p, r = dist.get_world_size(), dist.get_rank()
    (q, k, v), dout, grads, ref = _reference(shape, causal, seed)
    shard = ((lambda x: zigzag_shard(x, r, p)) if kind == "ring"
             else (lambda x: sequence_shard(x, r, p)))
    local = [shard(t).clone().requires_grad_(True) for t in (q, k, v)]
    attend = ring_attention if kind == "ring" else ulysses_attention
    out = attend(*local, causal=causal)
    out.backward(shard(dout))
    diffs = [(out - shard(ref)).abs().max()]
    diffs += [(t.grad - shard(g)).abs().max() for t, g in zip(local, grads, strict=True)]
    return float(torch.stack(diffs).max().detach())


def parity(kinds: tuple[str, ...]) -> dict[str, Any]:
    """Every case of :data:`CASES` for each of ``kinds``: the largest error per case."""
    p = dist.get_world_size()
    out: dict[str, Any] = {}
    for kind in kinds:
        for i, (batch, heads, chunk, dim, causal) in enumerate(CASES):
            if kind == "ulysses" and heads % p:
                continue
            out[f"{kind}-{i}"] = _errors(kind, (batch, heads, 2 * p * chunk, dim), causal, i)
    return out


def refusals() -> dict[str, str]:
    """The messages of the clear refusals: heads not dividing over the ranks (Ulysses), a
    sequence not dividing into 2·world chunks (ring) or over the ranks (Ulysses)."""
    p = dist.get_world_size()
    x = torch.zeros(1, p + 1, 2 * p, 4)
    got = {}
    try:
        ulysses_attention(x, x, x)
    except ValueError as err:
        got["heads"] = str(err)
    try:
        zigzag_shard(torch.zeros(1, 2, 2 * p + 1, 4), 0, p)
    except ValueError as err:
        got["seq"] = str(err)
    try:
        sequence_shard(torch.zeros(1, 2, p + 1, 4), 0, p)
    except ValueError as err:
        got["ulysses seq"] = str(err)
    return got


def pytorch_context_parallel(causal: bool) -> dict[str, Any]:
    """PyTorch's own ``torch.distributed.tensor.experimental.context_parallel`` against this
    lab's ring on the same zig-zag shards, forward: ``{"ok": largest difference}``, or
    ``{"error": "Type: first line"}`` where PyTorch's API does not run here. PyTorch shards
    its buffers in place with its head-tail load balancer (chunks ``r`` and ``2p−1−r``: the
    zig-zag layout). Its ring is registered for the CUDA attention operators only (flash,
    efficient, cuDNN); on the CPU ``scaled_dot_product_attention`` is
    ``_scaled_dot_product_flash_attention_for_cpu``, which the causal call cannot shard and the
    non-causal one reaches through DTensor's decomposition of the operator (slow: tens of
    seconds on two busy cores)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    p, r = dist.get_world_size(), dist.get_rank()
    (q, k, v), _, _, _ = _reference((1, 2, 4 * p, 8), causal, seed=7)
    try:
        mesh = init_device_mesh(q.device.type, (p,))
        buffers = [q.clone(), k.clone(), v.clone()]
        with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
            theirs = F.scaled_dot_product_attention(*buffers, is_causal=causal)
    except Exception as err:  # why PyTorch's API does not run here is the result
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
    ours = ring_attention(*(zigzag_shard(t, r, p) for t in (q, k, v)), causal=causal)
    return {"ok": float((theirs - ours).abs().max())}
