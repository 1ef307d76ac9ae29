"""One block of attention with its log-sum-exp, the online-softmax merge, and the zig-zag
layout: the local pieces ring attention is built from (book chapter 21).

Attention of queries ``q`` over keys/values ``k, v`` (shapes ``(batch, heads, tokens, dim)``,
as :func:`torch.nn.functional.scaled_dot_product_attention`) is ``softmax(q·kᵀ·σ)·v`` with
``σ = 1/√dim``. Over a *block* of keys a query row's result is a partial output ``o_b`` and its
log-sum-exp ``ℓ_b = log Σ_j exp(s_j)``; two blocks' results combine exactly (Milakov &
Gimelshein 2018, "Online normalizer calculation for softmax"; Dao et al. 2022, FlashAttention
§3.1)::

    ℓ = log(e^ℓ₁ + e^ℓ₂),   o = e^(ℓ₁−ℓ)·o₁ + e^(ℓ₂−ℓ)·o₂           (:func:`merge`)

so a rank can see the keys block by block, as they come round the ring, and still end with
exact attention. The backward of a block needs only ``q, k, v``, the output gradient ``dO``,
the *final* ``ℓ`` and ``Δ = rowsum(dO ∘ O)`` (FlashAttention §B.2): ``P = exp(q·kᵀ·σ − ℓ)``,
``dV = Pᵀ·dO``, ``dS = P ∘ (dO·vᵀ − Δ)``, ``dQ = dS·k·σ``, ``dK = dSᵀ·q·σ``.

**Zig-zag layout** (Brandon et al. 2023, "Striped Attention"; Llama 3 team 2024, §3.3.2
"Context parallelism"): with causal masking, a contiguous split gives the last rank ``p``
times the first one's work. Cut the sequence into ``2p`` chunks instead and give rank ``r``
chunks ``r`` and ``2p−1−r``: every rank then holds one early and one late chunk, and every
ring step but the first costs each rank exactly half a block (:func:`pieces`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from simulator.context_parallel import STEP_WORK


def check_layout(seq: int, world: int) -> int:
    """The zig-zag chunk length ``seq / 2p``; a clear error where ``seq`` does not divide."""
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")
    if seq % (2 * world):
        raise ValueError(f"ring attention cuts the sequence into 2·world = {2 * world} "
                         f"zig-zag chunks: a sequence of {seq} tokens does not divide; pad it "
                         f"to a multiple of {2 * world}")
    return seq // (2 * world)


def zigzag_chunks(rank: int, world: int) -> tuple[int, int]:
    """The two chunks (of ``2·world``) rank ``rank`` holds: ``r`` and ``2p − 1 − r``."""
    return rank, 2 * world - 1 - rank


def zigzag_shard(x: torch.Tensor, rank: int, world: int, dim: int = 2) -> torch.Tensor:
    """Rank ``rank``'s tokens of the whole sequence ``x`` (along ``dim``): its two zig-zag
    chunks, early one first."""
    c = check_layout(x.shape[dim], world)
    first, second = zigzag_chunks(rank, world)
    return torch.cat([x.narrow(dim, first * c, c), x.narrow(dim, second * c, c)], dim)


def positions(rank: int, world: int, chunk: int, device: torch.device) -> torch.Tensor:
    """Global token positions of rank ``rank``'s ``2·chunk`` local tokens."""
    first, second = zigzag_chunks(rank, world)
    return torch.cat([torch.arange(first * chunk, (first + 1) * chunk, device=device),
                      torch.arange(second * chunk, (second + 1) * chunk, device=device)])


@dataclass(frozen=True)
class Piece:
    """Part of a block a rank computes: query rows ``q_rows`` (a slice of its ``2c`` tokens)
    against key columns ``kv_cols`` (of the ``2c`` tokens it was sent), causally masked by
    global position or not."""

    q_rows: slice
    kv_cols: slice
    masked: bool


def pieces(kind: str, chunk: int) -> tuple[Piece, ...]:
    """The pieces of a step of ``kind`` (:func:`simulator.context_parallel.step_kind`: whose
    keys the rank holds), ``chunk`` tokens a zig-zag chunk.

    With local tokens ``[early | late]`` (chunks ``r`` and ``2p−1−r``) and keys from rank
    ``s`` (chunks ``s`` and ``2p−1−s``)::

        kind       early keys       late keys        work (c×c blocks)
        diagonal   causal / full    none / causal    3, two of them masked
        earlier    full  / full     none / none      2
        later      none  / full     none / full      2
        full       all four, unmasked                4

    (rows: the early then the late query chunk). A chunk never sees a later chunk, so
    ``none`` pieces are skipped, not computed and masked. The work column is the
    simulated twin's :data:`~simulator.context_parallel.STEP_WORK`.
    """
    if kind not in STEP_WORK:
        raise ValueError(f"unknown step kind {kind!r}")
    c, all_ = chunk, slice(0, 2 * chunk)
    early, late = slice(0, c), slice(c, 2 * c)
    return {"full": (Piece(all_, all_, False),),
            "diagonal": (Piece(all_, early, True), Piece(late, late, True)),
            "earlier": (Piece(all_, early, False),),
            "later": (Piece(late, all_, False),)}[kind]


def _scores(q: torch.Tensor, k: torch.Tensor, scale: float, mask: torch.Tensor | None
            ) -> torch.Tensor:
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    return s if mask is None else s.masked_fill(~mask, -math.inf)


def block_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                  mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of ``q`` over one block ``k, v``: the partial output and each row's
    log-sum-exp ``ℓ`` (shape ``(batch, heads, rows)``). ``mask``: ``(rows, cols)`` booleans,
    True where a query may see a key (every row must see one)."""
    s = _scores(q, k, scale, mask)
    lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(torch.exp(s - lse.unsqueeze(-1)), v), lse


def merge(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor,
          block_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The online-softmax merge of a block's ``(o_b, ℓ_b)`` into the running ``(o, ℓ)``; rows
    that have seen nothing yet hold ``o = 0, ℓ = −∞`` and take the block's as they are."""
    new = torch.logaddexp(lse, block_lse)
    return (torch.exp(lse - new).unsqueeze(-1) * out
            + torch.exp(block_lse - new).unsqueeze(-1) * block_out), new


def block_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
                   lse: torch.Tensor, delta: torch.Tensor, scale: float,
                   mask: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One block's share of ``dq, dk, dv`` from the final log-sum-exp ``lse`` and
    ``delta = rowsum(dout ∘ out)`` of the rows ``q`` (FlashAttention §B.2)."""
    p = torch.exp(_scores(q, k, scale, mask) - lse.unsqueeze(-1))
    dv = torch.matmul(p.transpose(-2, -1), dout)
    ds = p * (torch.matmul(dout, v.transpose(-2, -1)) - delta.unsqueeze(-1))
    return (torch.matmul(ds, k) * scale, torch.matmul(ds.transpose(-2, -1), q) * scale, dv)
