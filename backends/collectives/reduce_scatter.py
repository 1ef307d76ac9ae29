"""Reduce-scatter on real processes, three ways, from scratch on point-to-point messages.

Twin of :mod:`simulator.collectives.reduce_scatter` (same names, same steps). Every rank holds
``p·k`` elements in ``input``; afterwards rank ``r`` holds in ``output`` the reduction over all
ranks of piece ``r`` (elements ``[r·k, (r+1)·k)``) — as ``dist.reduce_scatter_tensor``. With
``n`` the bytes of ``input`` and γ the reduction time per byte (Thakur, Rabenseifner & Gropp
2005, §4.4):

* :func:`ring_reduce_scatter` (Patarasuk & Yuan 2009; the first half of the book's §2.5 ring
  all-reduce) — in step ``s = 0 … p−2`` rank ``r`` sends chunk ``(r − s − 1) mod p`` to
  ``r + 1``, receives chunk ``(r − s − 2) mod p`` from ``r − 1`` and reduces it into its own
  copy; after the last step chunk ``r`` is complete: ``(p−1)·α + n·(p−1)/p·(β + γ)``.
* :func:`recursive_halving_reduce_scatter` — in step ``d = p/2, p/4, …, 1`` rank ``r`` splits
  the block of pieces it is still responsible for in two, sends the half that ``r XOR d`` keeps
  (the upper half if bit ``d`` of ``r`` is 0) and reduces the half it keeps with the one
  received: ``lg p·α + n·(p−1)/p·(β + γ)`` for ``p = 2^k``. Other ``p`` fold first
  (:class:`~simulator.collectives.schedule.Fold`): odd rank ``r < 2·extra`` sends its whole
  input to ``r − 1``, which reduces; survivors halve over "super-pieces" (a survivor's piece
  plus its partner's) and each even partner finally sends piece ``r + 1`` to ``r + 1``.
* :func:`pairwise_reduce_scatter` — in step ``s = 1 … p−1`` rank ``r`` sends its piece
  ``(r + s) mod p`` to ``r + s`` and reduces the piece ``r`` received from ``r − s``:
  ``(p−1)·α + n·(p−1)/p·(β + γ)``.

``op`` is SUM, MAX, MIN or AVG (SUM, then divided by ``p``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from backends.collectives.comm import (
    Comm,
    Group,
    Pending,
    ReduceOp,
    check_flat,
    check_op,
    chunk_run,
    finish,
    scratch,
    scratch_rows,
)
from backends.trace import Tracer
from simulator.collectives.chunks import chunk_bounds
from simulator.collectives.schedule import Fold


def ring_reduce_scatter_chunks(comm: Comm, buf: torch.Tensor, bounds: list[tuple[int, int]],
                               op: ReduceOp) -> None:
    """Ring reduce-scatter inside ``buf``: afterwards chunk ``rank`` is reduced over all ranks.

    Step ``s`` sends chunk ``r − s − 1`` right and receives chunk ``r − s − 2`` from the left
    into one of two rows of a scratch buffer (the same rows from call to call,
    :func:`~backends.collectives.comm.scratch_rows`), then reduces it in place. The receive
    of step ``s + 1`` is posted into the other row before step ``s`` is waited for, so that
    the left neighbour's send finds it ready, as in gloo's own ring. The chunk step ``s + 1``
    sends is the one step ``s`` reduced into: its view is cut once, before the wait, so that
    only the reduction stands between a receive's end and the next send
    (:func:`~backends.collectives.all_gather.ring_all_gather_chunks`).
    """
    p, r = comm.world_size, comm.rank
    if p < 2:
        return
    right, left = (r + 1) % p, (r - 1) % p
    size, slots = max(hi - lo for lo, hi in bounds), min(2, p - 1)
    rows = scratch_rows(buf, slots, size)  # the same row tensors call after call

    def chunk(i: int) -> torch.Tensor:
        lo, hi = bounds[i % p]
        return buf[lo:hi]

    def receive(step: int) -> tuple[Pending, torch.Tensor]:  # chunk r - step - 2, row step % 2
        lo, hi = bounds[(r - step - 2) % p]
        row = rows[step % 2]
        into = row if hi - lo == size else row[:hi - lo]  # cut only a shorter chunk's
        return comm.irecv(left, into), into

    outgoing = chunk(r - 1)
    ahead = receive(0)  # posted before the first send (see Comm.sendrecv)
    sends = []
    for step in range(p - 1):
        current, into = ahead
        sends.append(comm.isend(right, outgoing))
        if step + 2 < p:
            ahead = receive(step + 1)
        outgoing = chunk(r - step - 2)  # reduced into now, sent right next step
        current.wait()
        comm.reduce(outgoing, into, op)
    for work in sends:
        work.wait()


def fold_in(comm: Comm, fold: Fold, buf: torch.Tensor, op: ReduceOp) -> None:
    """MPICH's fold for reductions: odd rank ``r < 2·extra`` sends ``buf`` to ``r − 1``,
    which reduces it into its own ``buf``."""
    r = comm.rank
    if r < 2 * fold.extra:
        if r % 2:
            comm.send(r - 1, buf)
        else:
            incoming = scratch(buf, buf.numel())
            comm.recv(r + 1, incoming)
            comm.reduce(buf, incoming, op)


def halving_reduce_scatter_chunks(comm: Comm, fold: Fold, buf: torch.Tensor,
                                  bounds: list[tuple[int, int]], op: ReduceOp) -> None:
    """Recursive halving among the survivors of ``fold``: afterwards survivor ``i`` holds
    ``bounds[i]`` (element offsets) reduced over all survivors."""
    me = fold.new_rank(comm.rank)
    assert me is not None, "only survivors of the fold run the halving"
    lo, hi, d = 0, fold.size, fold.size // 2
    middle = bounds[d][0] if d else 0
    incoming = scratch(buf, max(middle, buf.numel() - middle))  # the larger first half
    while d:
        partner = fold.old_rank(me ^ d)
        lower, upper = (lo, lo + d), (lo + d, hi)
        keep, give = (lower, upper) if me & d == 0 else (upper, lower)
        mine = chunk_run(buf, bounds, *keep)
        got = incoming[:mine.numel()]
        comm.sendrecv(partner, chunk_run(buf, bounds, *give), partner, got)
        comm.reduce(mine, got, op)
        (lo, hi), d = keep, d // 2


def _check(output: torch.Tensor, input: torch.Tensor, p: int, op: ReduceOp) -> None:
    check_flat(output, input)
    check_op(op, input)
    if input.numel() != p * output.numel():
        raise ValueError(f"input must hold {p}·{output.numel()} elements, got {input.numel()}")


def ring_reduce_scatter(output: torch.Tensor, input: torch.Tensor,
                        op: ReduceOp = dist.ReduceOp.SUM, group: Group = None,
                        tracer: Tracer | None = None) -> None:
    """Ring reduce-scatter; like ``dist.reduce_scatter_tensor(output, input, op)``."""
    comm = Comm(group, tracer)
    p, k, r = comm.world_size, output.numel(), comm.rank
    _check(output, input, p, op)
    buf = input.clone()  # the input stays untouched
    ring_reduce_scatter_chunks(comm, buf, chunk_bounds(p * k, p), op)
    output.copy_(buf[r * k:(r + 1) * k])
    finish(output, op, p)


def recursive_halving_reduce_scatter(output: torch.Tensor, input: torch.Tensor,
                                     op: ReduceOp = dist.ReduceOp.SUM, group: Group = None,
                                     tracer: Tracer | None = None) -> None:
    """Recursive-halving reduce-scatter (folded for non-power-of-two ``p``)."""
    comm = Comm(group, tracer)
    p, k, r = comm.world_size, output.numel(), comm.rank
    _check(output, input, p, op)
    fold, pieces, buf = Fold(p), chunk_bounds(p * k, p), input.clone()
    fold_in(comm, fold, buf, op)
    if fold.new_rank(r) is not None:
        blocks = [fold.blocks(i) for i in range(fold.size)]
        super_pieces = [(pieces[b[0]][0], pieces[b[-1]][1]) for b in blocks]
        halving_reduce_scatter_chunks(comm, fold, buf, super_pieces, op)
    if r < 2 * fold.extra:  # fold out: the even partner sends the odd one its piece
        if r % 2:
            comm.recv(r - 1, buf[r * k:(r + 1) * k])
        else:
            comm.send(r + 1, buf[(r + 1) * k:(r + 2) * k])
    output.copy_(buf[r * k:(r + 1) * k])
    finish(output, op, p)


def pairwise_reduce_scatter(output: torch.Tensor, input: torch.Tensor,
                            op: ReduceOp = dist.ReduceOp.SUM, group: Group = None,
                            tracer: Tracer | None = None) -> None:
    """Pairwise-exchange reduce-scatter: ``p − 1`` steps, each rank's piece comes directly."""
    comm = Comm(group, tracer)
    p, k, r = comm.world_size, output.numel(), comm.rank
    _check(output, input, p, op)
    output.copy_(input[r * k:(r + 1) * k])
    incoming = scratch(output, output.numel())
    for step in range(1, p):
        dst, src = (r + step) % p, (r - step) % p
        comm.sendrecv(dst, input[dst * k:(dst + 1) * k], src, incoming)
        comm.reduce(output, incoming, op)
    finish(output, op, p)
