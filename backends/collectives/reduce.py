"""Reduce on real processes, three ways, from scratch on point-to-point messages (§2.3).

Twin of :mod:`simulator.collectives.reduce` (same names, same steps). Every rank holds ``n``
bytes in ``tensor``; afterwards the root ``dst`` holds their reduction, as with
``dist.reduce(tensor, dst, op)``. Other ranks use their ``tensor`` as scratch space: it holds
partial results afterwards. Ranks are seen relative to the root, ``v = (r − dst) mod p``.
Costs (Thakur, Rabenseifner & Gropp 2005, §4.3; γ = reduction time per byte):

* :func:`linear_reduce` — the root receives every other rank's buffer, from ranks ``0, 1, …,
  p−1`` in turn, and reduces each: ``(p−1)·(α + n·β + n·γ)``.
* :func:`binomial_reduce` — in step ``m = 1, 2, 4, …`` rank ``v`` receives from ``v + m`` (if
  it exists) and reduces, until at ``v``'s lowest set bit it sends its partial result to
  ``v − m``: ``⌈lg p⌉·(α + n·β + n·γ)``.
* :func:`rabenseifner_reduce` — reduce-scatter by recursive halving
  (:mod:`~backends.collectives.reduce_scatter`) over ``p'`` chunks, then a binomial gather of
  the reduced chunks to the root: in step ``d = 1, 2, 4, …`` the rank whose bit ``d`` differs
  from the root's sends its block of ``d`` chunks to ``r XOR d`` and stops; the other receives.
  ``2·lg p·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ`` for ``p = 2^k``. Other ``p`` fold first as MPICH
  does (:class:`~simulator.collectives.schedule.Fold`); when the root is an odd rank that sits
  out, its even partner ``dst − 1`` gathers instead and finally sends it the result.

``op`` is SUM, MAX, MIN or AVG (SUM, then divided by ``p`` on the root).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from backends.collectives.comm import (
    Comm,
    Group,
    ReduceOp,
    check_flat,
    check_op,
    chunk_run,
    finish,
    scratch,
)
from backends.collectives.reduce_scatter import fold_in, halving_reduce_scatter_chunks
from backends.trace import Tracer
from simulator.collectives.chunks import chunk_bounds
from simulator.collectives.schedule import Fold


def linear_reduce(tensor: torch.Tensor, dst: int, op: ReduceOp = dist.ReduceOp.SUM,
                  group: Group = None, tracer: Tracer | None = None) -> None:
    """The root receives and reduces every other rank's buffer in turn; like ``dist.reduce``."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    check_op(op, tensor)
    root = comm.team_rank(dst)
    if comm.rank != root:
        comm.send(root, tensor)
        return
    incoming = scratch(tensor, tensor.numel())
    for src in range(comm.world_size):
        if src != root:
            comm.recv(src, incoming)
            comm.reduce(tensor, incoming, op)
    finish(tensor, op, comm.world_size)


def binomial_reduce(tensor: torch.Tensor, dst: int, op: ReduceOp = dist.ReduceOp.SUM,
                    group: Group = None, tracer: Tracer | None = None) -> None:
    """Reduce up a binomial tree rooted at ``dst``: ``⌈lg p⌉`` rounds of whole messages."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    check_op(op, tensor)
    p, root = comm.world_size, comm.team_rank(dst)
    v, mask = (comm.rank - root) % p, 1
    incoming = scratch(tensor, tensor.numel())
    while mask < p:
        if v & mask:  # my subtree is reduced: pass it to my parent v - mask
            comm.send((comm.rank - mask) % p, tensor)
            return
        if v + mask < p:  # reduce the child v + mask's subtree into mine
            comm.recv((comm.rank + mask) % p, incoming)
            comm.reduce(tensor, incoming, op)
        mask <<= 1
    finish(tensor, op, p)


def rabenseifner_reduce(tensor: torch.Tensor, dst: int, op: ReduceOp = dist.ReduceOp.SUM,
                        group: Group = None, tracer: Tracer | None = None) -> None:
    """Rabenseifner's reduce: recursive-halving reduce-scatter, then binomial gather."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    check_op(op, tensor)
    p, r, root = comm.world_size, comm.rank, comm.team_rank(dst)
    fold = Fold(p)
    gatherer = root - 1 if fold.new_rank(root) is None else root  # a survivor
    fold_in(comm, fold, tensor, op)
    me, new_root = fold.new_rank(r), fold.new_rank(gatherer)
    if me is not None:
        assert new_root is not None
        bounds = chunk_bounds(tensor.numel(), fold.size)
        halving_reduce_scatter_chunks(comm, fold, tensor, bounds, op)
        d = 1  # binomial gather to new_root: survivor me holds chunks [me, me+1), then more
        while d < fold.size:
            partner = me ^ d
            if me & d != new_root & d:
                mine = me - me % d
                comm.send(fold.old_rank(partner), chunk_run(tensor, bounds, mine, mine + d))
                break
            theirs = partner - partner % d
            comm.recv(fold.old_rank(partner), chunk_run(tensor, bounds, theirs, theirs + d))
            d *= 2
    if gatherer != root and r in (root, gatherer):  # the root sat out: hand it the result
        if r == gatherer:
            comm.send(root, tensor)
        else:
            comm.recv(gatherer, tensor)
    if r == root:
        finish(tensor, op, p)
