"""DeepSpeed Ulysses: trade the sequence dimension for the head dimension with two
all-to-alls, attend locally over the whole sequence, trade back (Jacobs et al. 2023,
"DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence
Transformer Models", §3; book chapter 21).

Each of ``p`` ranks holds ``s = S/p`` consecutive tokens of ``q, k, v``, shape
``(batch, H, s, dim)``. Attention mixes tokens but never heads, so an all-to-all that gives
rank ``j`` heads ``[j·H/p, (j+1)·H/p)`` of *every* token (:func:`seq_to_heads`) lets each rank
run ordinary attention on its ``H/p`` heads; a second all-to-all (:func:`heads_to_seq`) puts
the output back in sequence shards. The backward runs the same two all-to-alls in the
opposite directions (each one is the other's adjoint). Per rank each all-to-all moves
``(p−1)/p`` of its ``batch·H·s·dim`` elements per tensor, however long the sequence — ``H``
must divide by ``p``.

The all-to-alls are the from-scratch pairwise exchange of
:func:`backends.collectives.all_to_all.pairwise_all_to_all`; the local attention is PyTorch's
``scaled_dot_product_attention`` (what Ulysses leaves to the local kernel).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.collectives.all_to_all import pairwise_all_to_all
from backends.collectives.comm import Comm, Group


def seq_to_heads_tensor(x: torch.Tensor, p: int, group: Group) -> torch.Tensor:
    """``(..., H, s, dim)`` sequence-sharded → ``(..., H/p, p·s, dim)`` head-sharded."""
    send = x.view(*x.shape[:-3], p, x.shape[-3] // p, *x.shape[-2:]).movedim(-4, 0)
    send = send.contiguous()
    recv = torch.empty_like(send)
    pairwise_all_to_all(recv.view(-1), send.view(-1), group)
    return recv.movedim(0, -3).flatten(-3, -2)  # piece j: rank j's tokens


def heads_to_seq_tensor(y: torch.Tensor, p: int, group: Group) -> torch.Tensor:
    """``(..., h, p·s, dim)`` head-sharded → ``(..., p·h, s, dim)`` sequence-sharded."""
    send = y.reshape(*y.shape[:-2], p, y.shape[-2] // p, y.shape[-1]).movedim(-3, 0)
    send = send.contiguous()
    recv = torch.empty_like(send)
    pairwise_all_to_all(recv.view(-1), send.view(-1), group)
    return recv.movedim(0, -4).flatten(-4, -3)  # piece j: rank j's heads


class SeqToHeads(torch.autograd.Function):
    """The first all-to-all; its backward is the second."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: int, group: Group) -> torch.Tensor:
        ctx.p, ctx.group = p, group
        return seq_to_heads_tensor(x, p, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return heads_to_seq_tensor(grad, ctx.p, ctx.group), None, None


class HeadsToSeq(torch.autograd.Function):
    """The second all-to-all; its backward is the first."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, p: int, group: Group) -> torch.Tensor:
        ctx.p, ctx.group = p, group
        return heads_to_seq_tensor(y, p, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return seq_to_heads_tensor(grad, ctx.p, ctx.group), None, None


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      group: Group = None) -> torch.Tensor:
    """Exact attention over the whole sequence from this rank's consecutive shard of
    ``q, k, v`` (``(batch, heads, S/p, dim)``, rank ``r`` holding tokens ``[r·S/p, (r+1)·S/p)``);
    returns this rank's rows of the output. ``q, k, v`` travel in one all-to-all (stacked)."""
    p = Comm(group).world_size
    if not q.shape == k.shape == v.shape or q.dim() != 4:
        raise ValueError("ulysses_attention takes q, k, v of one shape (batch, heads, tokens, "
                         f"dim), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[1] % p:
        raise ValueError(f"Ulysses gives each rank heads/world heads: {q.shape[1]} heads do "
                         f"not divide over {p} ranks (use ring attention, or a head count "
                         f"that is a multiple of {p})")
    qkv = SeqToHeads.apply(torch.stack([q, k, v]), p, group)  # type: ignore[no-untyped-call]
    local = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=causal)
    out: torch.Tensor = HeadsToSeq.apply(local, p, group)  # type: ignore[no-untyped-call]
    return out


def sequence_shard(x: torch.Tensor, rank: int, world: int, dim: int = 2) -> torch.Tensor:
    """Rank ``rank``'s consecutive tokens of ``x`` for Ulysses; a clear error where the
    sequence does not divide over ``world`` ranks."""
    if x.shape[dim] % world:
        raise ValueError(f"Ulysses gives each rank sequence/world tokens: {x.shape[dim]} "
                         f"tokens do not divide over {world} ranks")
    return x.chunk(world, dim)[rank]
