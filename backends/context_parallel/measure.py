"""Timing the context-parallel twins (book chapter 21).

* :func:`time_step` — rank program (``backends.launch.spawn``): one step of attention on
  ``world`` ranks, forward and backward, ring or Ulysses; the slowest rank's seconds per step;
* :func:`profile_ring_steps` — one process, one thread: what each kind of ring step costs
  (:func:`~backends.context_parallel.blocks.step_kind`), forward and backward, s — the very
  step functions the ring runs (:func:`~backends.context_parallel.ring.attend_step`,
  :func:`~backends.context_parallel.ring.grad_step`), on one rank's shapes;
* :func:`profile_local_attention` — one process, one thread: Ulysses' local attention
  (``scaled_dot_product_attention`` on ``heads/world`` heads of the whole sequence), forward
  and backward, s.

Tensors are drawn from a seeded CPU generator and moved to :func:`backends.device.device`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from backends.context_parallel.blocks import positions
from backends.context_parallel.ring import attend_step, grad_step, ring_attention
from backends.context_parallel.ulysses import ulysses_attention
from backends.device import device
from backends.measure import median_time
from backends.zero_measure import slowest_rank_times

KINDS = ("ring", "ulysses")
"""The two twins' names."""


def _tensors(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device()) for _ in range(count)]


def time_step(kind: str, batch: int, heads: int, seq: int, dim: int, causal: bool,
              repeats: int) -> list[float]:
    """Rank program: ``repeats`` timed steps (forward + backward of ``kind``'s attention over
    a sequence of ``seq`` tokens split over the ranks), the slowest rank's seconds each."""
    p, r = dist.get_world_size(), dist.get_rank()
    local = seq // p
    q, k, v, dout = _tensors((batch, heads, local, dim), 4, seed=r)
    for t in (q, k, v):
        t.requires_grad_(True)
    attention = {"ring": ring_attention, "ulysses": ulysses_attention}[kind]

    def step() -> None:
        out = attention(q, k, v, causal)
        out.backward(dout)  # type: ignore[no-untyped-call]

    return slowest_rank_times(step, repeats)


@contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread for the block, as each rank runs (``spawn`` sets
    ``OMP_NUM_THREADS=1``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def profile_ring_steps(batch: int, heads: int, seq: int, dim: int, world: int, causal: bool,
                       repeats: int = 5) -> dict[str, dict[str, float]]:
    """Seconds of each kind of ring step on rank 1's shapes (``{kind: {"forward": s,
    "backward": s}}``): ``full`` without masking; with it ``diagonal``, ``earlier`` and
    ``later``. Also ``"prologue"``: the backward's ``Δ = rowsum(dO ∘ O)``, s."""
    chunk = seq // (2 * world)
    q, k, v, dout = _tensors((batch, heads, 2 * chunk, dim), 4, seed=0)
    kv, scale = torch.stack([k, v]), 1.0 / math.sqrt(dim)
    lse = torch.logsumexp(torch.randn(q.shape[:-1]), -1, keepdim=True).expand(
        q.shape[:-1]).contiguous().to(device())
    delta, dq = (dout * q).sum(-1), torch.zeros_like(q)
    kinds = ("diagonal", "earlier", "later") if causal else ("full",)
    rank = min(1, world - 1)
    sources = {"diagonal": rank, "earlier": 0, "later": min(rank + 1, world - 1), "full": 0}
    out: dict[str, dict[str, float]] = {}
    with one_thread():
        for kind in kinds:
            pos_q, pos_k = (positions(rank, world, chunk, q.device),
                            positions(sources[kind], world, chunk, q.device))

            def forward(kind: str = kind, pos_q: torch.Tensor = pos_q,
                        pos_k: torch.Tensor = pos_k) -> None:
                attend_step(q, kv, torch.zeros_like(q), torch.full_like(lse, -math.inf),
                            kind, pos_q, pos_k, scale)

            def backward(kind: str = kind, pos_q: torch.Tensor = pos_q,
                         pos_k: torch.Tensor = pos_k) -> None:
                grad_step(q, kv, dout, lse, delta, dq, kind, pos_q, pos_k, scale)

            out[kind] = {"forward": median_time(forward, repeats),
                         "backward": median_time(backward, repeats)}
        out["prologue"] = {"forward": 0.0,
                           "backward": median_time(lambda: (dout * q).sum(-1), repeats)}
    return out


def profile_local_attention(batch: int, heads: int, seq: int, dim: int, causal: bool,
                            repeats: int = 5) -> dict[str, float]:
    """Seconds of ``scaled_dot_product_attention`` over ``heads`` heads of ``seq`` tokens on
    one thread: ``{"forward": s, "backward": s}`` (backward: forward + backward, less the
    forward's median)."""
    q, k, v, dout = _tensors((batch, heads, seq, dim), 4, seed=0)
    for t in (q, k, v):
        t.requires_grad_(True)

    def forward() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def both() -> None:
        forward().backward(dout)  # type: ignore[no-untyped-call]

    with one_thread():
        fwd = median_time(forward, repeats)
        total = median_time(both, repeats)
    return {"forward": fwd, "backward": max(total - fwd, 0.0)}


def step_stats(samples: list[float]) -> dict[str, Any]:
    """Median, p10 and p90 of a step's samples, s."""
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])

    return {"median_s": statistics.median(ordered), "p10_s": pct(0.1), "p90_s": pct(0.9)}


