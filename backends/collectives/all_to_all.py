"""All-to-all on real processes, two ways, from scratch on point-to-point messages (§2.3).

Twin of :mod:`simulator.collectives.all_to_all` (same names, same steps). Every rank holds
``p·k`` elements in ``input``, piece ``j`` (elements ``[j·k, (j+1)·k)``) meant for rank ``j``;
afterwards piece ``j`` of ``output`` is what rank ``j`` meant for this rank — as
``dist.all_to_all_single(output, input)`` with equal splits. With ``n`` the bytes one rank
sends (Thakur, Rabenseifner & Gropp 2005, §3.5):

* :func:`pairwise_all_to_all` — in step ``s = 1 … p−1`` rank ``r`` swaps pieces with one peer:
  ``r XOR s`` when ``p`` is a power of two, otherwise it sends to ``r + s`` and receives from
  ``r − s``: ``(p−1)·α + n·β``.
* :func:`bruck_all_to_all` (Bruck et al. 1997) — rotate the pieces locally so that position
  ``i`` holds the piece for rank ``r + i``; in step ``d = 1, 2, 4, …`` send the pieces at every
  position with bit ``d`` set to ``r + d`` (packed into one message) and put the ones received
  from ``r − d`` in their place; finally position ``i`` holds the piece from rank ``r − i``:
  ``⌈lg p⌉·α + (n/2)·⌈lg p⌉·β``.
"""

from __future__ import annotations

import torch

from backends.collectives.comm import Comm, Group, check_flat
from backends.trace import Tracer


def _check(output: torch.Tensor, input: torch.Tensor, p: int) -> None:
    check_flat(output, input)
    if output.numel() != input.numel() or input.numel() % p:
        raise ValueError(f"input and output must hold the same multiple of {p} elements, "
                         f"got {input.numel()} and {output.numel()}")


def pairwise_all_to_all(output: torch.Tensor, input: torch.Tensor, group: Group = None,
                        tracer: Tracer | None = None) -> None:
    """Pairwise exchange: ``p − 1`` steps, one peer each."""
    comm = Comm(group, tracer)
    p, r = comm.world_size, comm.rank
    _check(output, input, p)
    k = input.numel() // p
    output[r * k:(r + 1) * k].copy_(input[r * k:(r + 1) * k])
    for step in range(1, p):
        dst, src = ((r ^ step, r ^ step) if p & (p - 1) == 0
                    else ((r + step) % p, (r - step) % p))
        comm.sendrecv(dst, input[dst * k:(dst + 1) * k], src, output[src * k:(src + 1) * k])


def bruck_all_to_all(output: torch.Tensor, input: torch.Tensor, group: Group = None,
                     tracer: Tracer | None = None) -> None:
    """Bruck's all-to-all: ``⌈lg p⌉`` steps, each moving about half the pieces."""
    comm = Comm(group, tracer)
    p, r = comm.world_size, comm.rank
    _check(output, input, p)
    k = input.numel() // p
    pieces = torch.roll(input, -r * k).view(p, k)  # position i: the piece for rank r + i
    d = 1
    while d < p:
        moving = torch.tensor([i for i in range(p) if i & d], device=input.device)
        incoming = input.new_empty((len(moving), k))
        comm.sendrecv((r + d) % p, pieces[moving].view(-1), (r - d) % p, incoming.view(-1))
        pieces[moving] = incoming
        d *= 2
    order = torch.tensor([(r - j) % p for j in range(p)], device=input.device)  # piece j: rank j
    output.copy_(pieces[order].view(-1))
