"""The exchanges of expert parallelism, from scratch on point-to-point messages (chapter 22).

Twin of :func:`simulator.moe.uneven_all_to_all` (same name, same steps). Dispatching tokens to
the ranks that hold their experts is an all-to-all whose pieces differ in size: rank ``r``
sends ``input_splits[j]`` rows to rank ``j`` and receives ``output_splits[j]`` rows from it,
as ``dist.all_to_all_single(output, input, output_splits, input_splits)`` does (GShard,
Lepikhin et al. 2021 §3.2; DeepSpeed-MoE, Rajbhandari et al. 2022 §5). A receiver must know
its sizes before the bytes come, so a dispatch is two exchanges:

1. :func:`exchange_counts` — an all-to-all of equal pieces: how many tokens each rank sends
   to each of the receiver's experts (``p × E/p`` integers);
2. :func:`all_to_all_uneven` — the tokens themselves, pairwise: in step ``s = 1 … p−1`` rank
   ``r`` swaps with ``r XOR s`` when ``p`` is a power of two, otherwise sends to ``r + s``
   and receives from ``r − s`` (the schedule of
   :func:`backends.collectives.all_to_all.pairwise_all_to_all`); an empty piece is not sent
   at all (both sides know it is empty from the counts).

:class:`Exchange` makes the exchange differentiable: the backward of a dispatch is the reverse
all-to-all (the gradients of the received rows go back to where the rows came from, the
splits swapped) — and the backward of the combine is a dispatch.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.collectives.all_to_all import pairwise_all_to_all
from backends.collectives.comm import Comm, Group, Pending
from backends.trace import Tracer


def _offsets(splits: list[int]) -> list[int]:
    out = [0]
    for n in splits:
        out.append(out[-1] + n)
    return out


def all_to_all_uneven(output: torch.Tensor, input: torch.Tensor, output_splits: list[int],
                      input_splits: list[int], group: Group = None,
                      tracer: Tracer | None = None) -> None:
    """Pairwise all-to-all with pieces of any size: rows ``input_splits[j]`` of ``input`` go
    to rank ``j``; ``output_splits[j]`` rows come from rank ``j`` into ``output``, in rank
    order. Rows are slices along dim 0 of contiguous tensors."""
    comm = Comm(group, tracer)
    p, r = comm.world_size, comm.rank
    if len(input_splits) != p or len(output_splits) != p:
        raise ValueError(f"need {p} input and output splits, got {len(input_splits)} and "
                         f"{len(output_splits)}")
    if sum(input_splits) != input.shape[0] or sum(output_splits) != output.shape[0]:
        raise ValueError(f"splits {input_splits} → {output_splits} do not cover "
                         f"{input.shape[0]} → {output.shape[0]} rows")
    if not (input.is_contiguous() and output.is_contiguous()):
        raise ValueError("all_to_all_uneven needs contiguous tensors")
    send, recv = _offsets(input_splits), _offsets(output_splits)
    output[recv[r]:recv[r + 1]].copy_(input[send[r]:send[r + 1]])
    for step in range(1, p):
        dst, src = ((r ^ step, r ^ step) if p & (p - 1) == 0
                    else ((r + step) % p, (r - step) % p))
        pending: list[Pending] = []
        if output_splits[src]:
            pending.append(comm.irecv(src, output[recv[src]:recv[src + 1]]))
        if input_splits[dst]:
            pending.append(comm.isend(dst, input[send[dst]:send[dst + 1]]))
        for work in pending:
            work.wait()


def exchange_counts(counts: torch.Tensor, group: Group = None) -> torch.Tensor:
    """``counts[j, e]``: rows this rank sends to rank ``j``'s local expert ``e`` (``p × m``
    integers); returns ``got[s, e]``, the rows rank ``s`` sends to this rank's expert ``e``."""
    got = torch.empty_like(counts)
    pairwise_all_to_all(got.view(-1), counts.contiguous().view(-1), group)
    return got


class Exchange(torch.autograd.Function):
    """A differentiable :func:`all_to_all_uneven` of rows: forward sends ``input_splits`` and
    receives ``output_splits``; backward sends the gradients back, the splits swapped."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, output_splits: list[int],
                input_splits: list[int], group: Group = None) -> torch.Tensor:
        ctx.splits, ctx.group = (output_splits, input_splits), group
        output = input.new_empty((sum(output_splits), *input.shape[1:]))
        all_to_all_uneven(output, input.contiguous(), output_splits, input_splits, group)
        return output

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        output_splits, input_splits = ctx.splits
        back = grad.new_empty((sum(input_splits), *grad.shape[1:]))
        all_to_all_uneven(back, grad.contiguous(), input_splits, output_splits, ctx.group)
        return back, None, None, None


def exchange(rows: torch.Tensor, output_splits: list[int], input_splits: list[int],
             group: Group = None) -> torch.Tensor:
    """:class:`Exchange` applied: the rows received, ``sum(output_splits)`` of them."""
    out: torch.Tensor = Exchange.apply(  # type: ignore[no-untyped-call]
        rows, output_splits, input_splits, group)
    return out
