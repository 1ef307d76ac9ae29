"""Ring attention: the keys and values go round a ring of ranks, block by block, while each
rank keeps its own queries (Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise
Transformers for Near-Infinite Context", §3; book chapter 21).

Each of ``p`` ranks holds ``2c`` tokens of the sequence — its two zig-zag chunks
(:mod:`backends.context_parallel.blocks`) — as ``q, k, v`` of shape
``(batch, heads, 2c, dim)``. **Forward**, step ``s = 0 … p−1``: rank ``r`` holds the keys and
values of rank ``r − s``; it posts their transfer to ``r + 1`` (and the receive of the next
block from ``r − 1``, ``isend``/``irecv``) *before* it computes its attention over them, so the
transfer hides behind the compute when the block is large enough, and merges the block's
partial output into its running one by the online softmax. It keeps ``ℓ``, the log-sum-exp of
each query row, for the backward.

**Backward**, the same ring again: step ``s`` computes this rank's queries' share of
``dk, dv`` for the block of rank ``r − s`` (and adds to its own ``dq``); the block's running
``dk, dv`` arrive from ``r − 1`` (who computed its share a step earlier), get this share added
and move on to ``r + 1``; after ``p`` hops they are home. Per rank: ``p − 1`` key/value
blocks sent in each pass and ``p`` gradient blocks in the backward, ``2·(2c)·batch·heads·dim``
elements each.

With causal masking each step costs half a ``2c × 2c`` block except the first (three
quarters; :func:`~backends.context_parallel.blocks.pieces`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from backends.collectives.comm import Comm, Group, Pending
from backends.context_parallel.blocks import (
    Piece,
    block_backward,
    block_forward,
    merge,
    pieces,
    positions,
)
from simulator.context_parallel import step_kind

KV_TAG, GRAD_TAG = 21, 22
"""Message tags of the key/value blocks and of their gradients' running sums."""


def _mask(piece: Piece, pos_q: torch.Tensor, pos_k: torch.Tensor
          ) -> torch.Tensor | None:
    if not piece.masked:
        return None
    return pos_q[piece.q_rows].unsqueeze(-1) >= pos_k[piece.kv_cols].unsqueeze(0)


def attend_step(q: torch.Tensor, kv: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                kind: str, pos_q: torch.Tensor, pos_k: torch.Tensor, scale: float) -> None:
    """One forward step: ``q``'s attention over the block ``kv = stack(k, v)`` merged into
    ``out, lse`` in place, piece by piece (:func:`~backends.context_parallel.blocks.pieces`)."""
    for piece in pieces(kind, q.shape[-2] // 2):
        rows, cols = piece.q_rows, piece.kv_cols
        o, ell = block_forward(q[..., rows, :], kv[0][..., cols, :], kv[1][..., cols, :],
                               scale, _mask(piece, pos_q, pos_k))
        out[..., rows, :], lse[..., rows] = merge(out[..., rows, :], lse[..., rows], o, ell)


def grad_step(q: torch.Tensor, kv: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
              delta: torch.Tensor, dq: torch.Tensor, kind: str, pos_q: torch.Tensor,
              pos_k: torch.Tensor, scale: float) -> torch.Tensor:
    """One backward step: adds this block's share to ``dq`` in place and returns this rank's
    queries' share of the block's ``stack(dk, dv)``."""
    dkv = torch.zeros_like(kv)
    for piece in pieces(kind, q.shape[-2] // 2):
        rows, cols = piece.q_rows, piece.kv_cols
        gq, gk, gv = block_backward(q[..., rows, :], kv[0][..., cols, :], kv[1][..., cols, :],
                                    dout[..., rows, :], lse[..., rows], delta[..., rows],
                                    scale, _mask(piece, pos_q, pos_k))
        dq[..., rows, :] += gq
        dkv[0][..., cols, :] += gk
        dkv[1][..., cols, :] += gv
    return dkv


class _Ring:
    """This rank's neighbours and the zig-zag positions of every rank's tokens."""

    def __init__(self, comm: Comm, tokens: int, device: torch.device) -> None:
        self.comm, self.p, self.r = comm, comm.world_size, comm.rank
        self.next, self.prev = (self.r + 1) % self.p, (self.r - 1) % self.p
        self.pos = [positions(rank, self.p, tokens // 2, device) for rank in range(self.p)]

    def source(self, step: int) -> int:
        """Whose keys and values this rank holds at ``step``."""
        return (self.r - step) % self.p

    def pass_on(self, kv: torch.Tensor, into: torch.Tensor) -> tuple[Pending, Pending]:
        """Post ``kv``'s transfer to the next rank and the previous one's into ``into``."""
        return (self.comm.irecv(self.prev, into, KV_TAG),
                self.comm.isend(self.next, kv, KV_TAG))


def ring_forward(comm: Comm, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward pass on this rank: its queries' output and log-sum-exp ``ℓ``."""
    ring = _Ring(comm, q.shape[-2], q.device)
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype, device=q.device)
    kv, spare = torch.stack([k, v]), torch.empty((2, *k.shape), dtype=k.dtype,
                                                 device=k.device)
    for step in range(ring.p):
        src = ring.source(step)
        moving = ring.pass_on(kv, spare) if step < ring.p - 1 else ()
        attend_step(q, kv, out, lse, step_kind(ring.r, src, causal), ring.pos[ring.r],
                    ring.pos[src], scale)
        for work in moving:
            work.wait()
        kv, spare = spare, kv
    return out, lse


def ring_backward(comm: Comm, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  out: torch.Tensor, lse: torch.Tensor, dout: torch.Tensor, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward pass on this rank: ``dq, dk, dv`` of its own tokens."""
    ring = _Ring(comm, q.shape[-2], q.device)
    delta = (dout * out).sum(-1)
    dq = torch.zeros_like(q)
    kv, spare = torch.stack([k, v]), torch.empty((2, *k.shape), dtype=k.dtype,
                                                 device=k.device)
    sends: list[Pending] = []
    dkv = kv
    for step in range(ring.p):
        src = ring.source(step)
        moving = ring.pass_on(kv, spare) if step < ring.p - 1 else ()
        if step > 0:  # the running dk, dv of this block, from the rank that held it last
            running = torch.empty_like(kv)
            arriving = comm.irecv(ring.prev, running, GRAD_TAG)
        dkv = grad_step(q, kv, dout, lse, delta, dq, step_kind(ring.r, src, causal),
                        ring.pos[ring.r], ring.pos[src], scale)
        if step > 0:
            arriving.wait()
            dkv += running
        if ring.p > 1:
            sends.append(comm.isend(ring.next, dkv, GRAD_TAG))
        for work in moving:
            work.wait()
        kv, spare = spare, kv
    if ring.p > 1:  # our own block's dk, dv, home after p hops
        dkv = torch.empty_like(kv)
        comm.irecv(ring.prev, dkv, GRAD_TAG).wait()
    for work in sends:
        work.wait()
    return dq, dkv[0], dkv[1]


class RingAttention(torch.autograd.Function):
    """Ring attention as an ``autograd.Function``: forward keeps ``ℓ``; backward sends the
    keys, values and their gradients round the ring (:func:`ring_backward`)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                group: Group) -> torch.Tensor:
        comm = Comm(group)
        scale = 1.0 / math.sqrt(q.shape[-1])
        out, lse = ring_forward(comm, q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.group, ctx.scale = causal, group, scale
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_backward(Comm(ctx.group), q, k, v, out, lse, dout.contiguous(),
                                   ctx.causal, ctx.scale)
        return dq, dk, dv, None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   group: Group = None) -> torch.Tensor:
    """Exact attention over the whole sequence from this rank's zig-zag shard of ``q, k, v``
    (``(batch, heads, 2c, dim)``, :func:`~backends.context_parallel.blocks.zigzag_shard`),
    scaled by ``1/√dim`` as ``scaled_dot_product_attention``; returns this rank's rows."""
    if not q.shape == k.shape == v.shape or q.dim() != 4:
        raise ValueError("ring_attention takes q, k, v of one shape (batch, heads, tokens, "
                         f"dim), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-2] % 2:
        raise ValueError(f"a rank holds two zig-zag chunks of equal length, got {q.shape[-2]} "
                         "tokens (an odd number)")
    out: torch.Tensor = RingAttention.apply(  # type: ignore[no-untyped-call]
        q.contiguous(), k.contiguous(), v.contiguous(), causal, group)
    return out
