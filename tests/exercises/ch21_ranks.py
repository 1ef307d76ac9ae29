"""Rank programs for grading chapter 21's exercises on the lab's real context parallelism
(:mod:`backends.context_parallel`): each returns plain numbers the tests compare with the
answers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist

from backends.collectives.comm import Comm
from backends.context_parallel.ulysses import seq_to_heads_tensor, ulysses_attention


def ulysses(shapes: list[tuple[int, int, int, int]]) -> list[dict[str, Any]]:
    """For each whole-sequence ``(batch, heads, seq, dim)``: the shape of this rank's ``q``
    after the real sequence-to-heads all-to-all, and the bytes this rank sends in one real
    Ulysses step of fp32 attention, forward and backward (every message counted)."""
    p, r = dist.get_world_size(), dist.get_rank()
    out = []
    for batch, heads, seq, dim in shapes:
        g = torch.Generator().manual_seed(r)
        q, k, v = (torch.randn(batch, heads, seq // p, dim, generator=g, requires_grad=True)
                   for _ in range(3))
        shape = tuple(seq_to_heads_tensor(q.detach(), p, None).shape)
        with counting_sends() as sent:
            ulysses_attention(q, k, v, causal=True).sum().backward()  # type: ignore[no-untyped-call]
        out.append({"shape": shape, "sent_bytes": sum(sent)})
    return out


@contextmanager
def counting_sends() -> Iterator[list[int]]:
    """Inside the block every message the lab's :class:`~backends.collectives.comm.Comm`
    sends is counted: yields the list of their bytes."""
    sent: list[int] = []
    real = Comm.isend

    def isend(self: Comm, dst: int, tensor: torch.Tensor, tag: int = 0) -> Any:
        sent.append(tensor.numel() * tensor.element_size())
        return real(self, dst, tensor, tag)

    Comm.isend = isend  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        Comm.isend = real  # type: ignore[method-assign]
