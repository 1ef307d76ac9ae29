"""Scatter and gather on real processes, from scratch on point-to-point messages (book §2.3).

Twin of :mod:`simulator.collectives.scatter_gather` (same names, same steps). The root holds one
flat buffer of ``p·k`` elements, rank ``j``'s piece being elements ``[j·k, (j+1)·k)`` — the
``scatter_list`` of ``dist.scatter`` (and the ``gather_list`` of ``dist.gather``) concatenated.

* **linear** — the root sends (receives) each piece itself, to ranks ``0, 1, …, p−1`` in turn
  (skipping itself): ``(p−1)·(α + k·β)``.
* **binomial** (Thakur, Rabenseifner & Gropp 2005, §4.1) — in relative ranks ``v = (r − root)
  mod p`` the root first rotates its buffer so that ``v``'s piece comes ``v``-th. Rank ``v``
  with lowest set bit ``m`` receives the pieces of its whole subtree, ``[v, v+m)``, from
  ``v − m``; then for ``m/2, m/4, …, 1`` it hands ``[v+m', v+2m')`` to ``v + m'``. The root
  starts with the largest ``m'`` below ``p``. Gather runs the same tree upwards (``m' = 1, 2,
  …``: receive ``[v+m', v+2m')`` from ``v+m'``, then at ``v``'s lowest set bit send ``[v, v+m)``
  to ``v − m``). ``lg p·α + n·(p−1)/p·β`` with ``n = p·k``::

      p = 8, root 0   step 1: 0→4 [4,8)   step 2: 0→2 [2,4), 4→6 [6,8)
                      step 3: 0→1, 2→3, 4→5, 6→7 (one piece each)

The two binomial walks work on any list of chunk ``bounds`` in relative-rank order, which is
how :func:`~backends.collectives.broadcast.scatter_allgather_broadcast` reuses the scatter.
"""

from __future__ import annotations

import torch

from backends.collectives.comm import Comm, Group, check_flat, chunk_run
from backends.trace import Tracer
from simulator.collectives.chunks import chunk_bounds


def binomial_scatter_chunks(comm: Comm, buf: torch.Tensor, bounds: list[tuple[int, int]],
                            root: int) -> None:
    """Binomial scatter inside ``buf``: relative rank ``v`` ends up with chunk ``bounds[v]``."""
    p = comm.world_size
    v, mask = (comm.rank - root) % p, 1
    while mask < p:  # receive my subtree [v, v+mask) from my parent v - mask
        if v & mask:
            comm.recv((comm.rank - mask) % p, chunk_run(buf, bounds, v, v + mask))
            break
        mask <<= 1
    mask >>= 1
    while mask:  # hand the subtree [v+mask, v+2·mask) to the child v + mask
        if v + mask < p:
            comm.send((comm.rank + mask) % p, chunk_run(buf, bounds, v + mask, v + 2 * mask))
        mask >>= 1


def binomial_gather_chunks(comm: Comm, buf: torch.Tensor, bounds: list[tuple[int, int]],
                           root: int) -> None:
    """Binomial gather inside ``buf``: the root ends up with every chunk ``bounds[v]``."""
    p = comm.world_size
    v, mask = (comm.rank - root) % p, 1
    while mask < p:
        if v & mask:  # my subtree [v, v+mask) is complete: pass it to my parent
            comm.send((comm.rank - mask) % p, chunk_run(buf, bounds, v, v + mask))
            break
        if v + mask < p:  # collect the child v + mask's subtree
            comm.recv((comm.rank + mask) % p, chunk_run(buf, bounds, v + mask, v + 2 * mask))
        mask <<= 1


def _check(piece: torch.Tensor, whole: torch.Tensor | None, p: int, at_root: bool) -> None:
    check_flat(piece)
    if at_root and (whole is None or whole.dim() != 1 or whole.numel() != p * piece.numel()):
        got = None if whole is None else tuple(whole.shape)
        raise ValueError(f"the root needs a flat buffer of {p}·{piece.numel()} elements, "
                         f"got {got}")


def linear_scatter(output: torch.Tensor, input: torch.Tensor | None, src: int,
                   group: Group = None, tracer: Tracer | None = None) -> None:
    """The root ``src`` sends piece ``j`` of ``input`` to rank ``j``; like ``dist.scatter``."""
    comm = Comm(group, tracer)
    p, k, root = comm.world_size, output.numel(), comm.team_rank(src)
    _check(output, input, p, comm.rank == root)
    if comm.rank != root:
        comm.recv(root, output)
        return
    assert input is not None
    for dst in range(p):
        if dst == root:
            output.copy_(input[dst * k:(dst + 1) * k])
        else:
            comm.send(dst, input[dst * k:(dst + 1) * k])


def binomial_scatter(output: torch.Tensor, input: torch.Tensor | None, src: int,
                     group: Group = None, tracer: Tracer | None = None) -> None:
    """Scatter down a binomial tree rooted at ``src``; like ``dist.scatter``."""
    comm = Comm(group, tracer)
    p, k, root = comm.world_size, output.numel(), comm.team_rank(src)
    _check(output, input, p, comm.rank == root)
    if comm.rank == root:
        assert input is not None
        buf = torch.roll(input, -root * k)  # relative rank v's piece comes v-th
    else:
        buf = output.new_empty(p * k)  # only my subtree's part is ever written
    bounds = chunk_bounds(p * k, p)
    binomial_scatter_chunks(comm, buf, bounds, root)
    v = (comm.rank - root) % p
    output.copy_(buf[bounds[v][0]:bounds[v][1]])


def linear_gather(input: torch.Tensor, output: torch.Tensor | None, dst: int,
                  group: Group = None, tracer: Tracer | None = None) -> None:
    """The root ``dst`` receives piece ``j`` from rank ``j`` in turn; like ``dist.gather``."""
    comm = Comm(group, tracer)
    p, k, root = comm.world_size, input.numel(), comm.team_rank(dst)
    _check(input, output, p, comm.rank == root)
    if comm.rank != root:
        comm.send(root, input)
        return
    assert output is not None
    for src in range(p):
        if src == root:
            output[src * k:(src + 1) * k].copy_(input)
        else:
            comm.recv(src, output[src * k:(src + 1) * k])


def binomial_gather(input: torch.Tensor, output: torch.Tensor | None, dst: int,
                    group: Group = None, tracer: Tracer | None = None) -> None:
    """Gather up a binomial tree rooted at ``dst``; like ``dist.gather``."""
    comm = Comm(group, tracer)
    p, k, root = comm.world_size, input.numel(), comm.team_rank(dst)
    _check(input, output, p, comm.rank == root)
    v, bounds = (comm.rank - root) % p, chunk_bounds(p * k, p)
    buf = input.new_empty(p * k)  # in relative-rank order; only my subtree's part is used
    buf[bounds[v][0]:bounds[v][1]].copy_(input)
    binomial_gather_chunks(comm, buf, bounds, root)
    if comm.rank == root:
        assert output is not None
        output.copy_(torch.roll(buf, root * k))
