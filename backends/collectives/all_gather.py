"""All-gather on real processes, three ways, from scratch on point-to-point messages (§2.3).

Twin of :mod:`simulator.collectives.all_gather` (same names, same steps). Every rank holds
``k`` elements in ``input``; afterwards every rank holds all ``p·k`` in ``output``, rank
``j``'s piece at ``[j·k, (j+1)·k)`` — as with ``dist.all_gather_into_tensor``. With
``n = p·k·itemsize`` bytes gathered per rank (Thakur, Rabenseifner & Gropp 2005, §4.2):

* :func:`ring_all_gather` (Patarasuk & Yuan 2009) — in step ``s = 0 … p−2`` rank ``r`` sends
  chunk ``(r − s) mod p`` to ``r + 1`` and receives chunk ``(r − s − 1) mod p`` from ``r − 1``:
  ``(p−1)·α + n·(p−1)/p·β``.
* :func:`recursive_doubling_all_gather` — in step ``d = 1, 2, 4, …`` rank ``r`` swaps
  everything it has, the ``d`` pieces of the aligned block ``[⌊r/d⌋·d, ⌊r/d⌋·d + d)``, with
  ``r XOR d``: ``lg p·α + n·(p−1)/p·β`` for ``p = 2^k``. Other ``p`` fold first
  (:class:`~simulator.collectives.schedule.Fold`): odd rank ``r < 2·extra`` sends its piece to
  ``r − 1``, the ``p'`` survivors run the doubling on "super-pieces" (a survivor's own piece
  plus its partner's), and each even partner finally sends the whole result to ``r + 1``.
* :func:`bruck_all_gather` (Bruck et al. 1997) — any ``p``: rank ``r`` keeps pieces in the
  order ``r, r+1, …``; in step ``d = 1, 2, 4, …`` it sends its first ``min(d, p−d)`` pieces to
  ``r − d`` and appends as many from ``r + d``; a final local rotation puts the pieces in rank
  order: ``⌈lg p⌉·α + n·(p−1)/p·β``.
"""

from __future__ import annotations

import torch

from backends.collectives.comm import Comm, Group, check_flat, chunk_run
from backends.trace import Tracer
from simulator.collectives.chunks import chunk_bounds
from simulator.collectives.schedule import Fold


def ring_all_gather_chunks(comm: Comm, buf: torch.Tensor, bounds: list[tuple[int, int]],
                           mine: int) -> None:
    """Ring all-gather inside ``buf``: each rank holds chunk ``mine``, then holds them all.

    ``mine`` is ``rank`` for an all-gather and ``rank − root`` for a broadcast; step ``s``
    sends chunk ``mine − s`` right and receives chunk ``mine − s − 1`` from the left. The
    receive of step ``s + 1`` is posted before step ``s`` is waited for, so that the left
    neighbour's send finds it ready (see :mod:`~backends.collectives.comm`). Nothing but the
    loop stands between a receive's end and the next send: that send's chunk is the view the
    receive filled, and the one view a step makes (the receive posted ahead) is cut after
    the send is posted — with four ranks on two cores, cutting the views in the loop before
    the send cost 45–80 µs a step (``benchmarks/ring_step_python.py``).
    """
    p = comm.world_size
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p

    def chunk(i: int) -> torch.Tensor:
        lo, hi = bounds[i % p]
        return buf[lo:hi]

    if p < 2:
        return
    outgoing, into = chunk(mine), chunk(mine - 1)
    ahead = comm.irecv(left, into)  # before the first send
    sends = []
    for step in range(p - 1):
        current, got = ahead, into
        sends.append(comm.isend(right, outgoing))
        if step + 2 < p:
            into = chunk(mine - step - 2)
            ahead = comm.irecv(left, into)
        current.wait()
        outgoing = got  # the chunk just received goes right next
    for work in sends:
        work.wait()


def doubling_all_gather_chunks(comm: Comm, fold: Fold, buf: torch.Tensor,
                               bounds: list[tuple[int, int]]) -> None:
    """Recursive doubling among the survivors of ``fold``: survivor ``i`` holds ``bounds[i]``
    (element offsets), and in step ``d`` swaps the aligned block of ``d`` of them with
    ``i XOR d``. Afterwards every survivor holds all of ``bounds``."""
    me, d = fold.new_rank(comm.rank), 1
    assert me is not None, "only survivors of the fold run the doubling"
    while d < fold.size:
        partner = me ^ d
        mine, theirs = me - me % d, partner - partner % d
        comm.sendrecv(fold.old_rank(partner), chunk_run(buf, bounds, mine, mine + d),
                      fold.old_rank(partner), chunk_run(buf, bounds, theirs, theirs + d))
        d *= 2


def _check(output: torch.Tensor, input: torch.Tensor, p: int) -> None:
    check_flat(output, input)
    if output.numel() != p * input.numel():
        raise ValueError(f"output must hold {p}·{input.numel()} elements, "
                         f"got {output.numel()}")


def ring_all_gather(output: torch.Tensor, input: torch.Tensor, group: Group = None,
                    tracer: Tracer | None = None) -> None:
    """Ring all-gather; like ``dist.all_gather_into_tensor(output, input)``."""
    comm = Comm(group, tracer)
    p, k = comm.world_size, input.numel()
    _check(output, input, p)
    output[comm.rank * k:(comm.rank + 1) * k].copy_(input)
    ring_all_gather_chunks(comm, output, chunk_bounds(p * k, p), mine=comm.rank)


def recursive_doubling_all_gather(output: torch.Tensor, input: torch.Tensor,
                                  group: Group = None, tracer: Tracer | None = None) -> None:
    """Recursive-doubling all-gather (folded for non-power-of-two ``p``)."""
    comm = Comm(group, tracer)
    p, k, r = comm.world_size, input.numel(), comm.rank
    _check(output, input, p)
    fold, pieces = Fold(p), chunk_bounds(p * k, p)
    output[r * k:(r + 1) * k].copy_(input)
    if r < 2 * fold.extra:  # fold in: odd ranks hand their piece to the even partner
        if r % 2:
            comm.send(r - 1, input)
        else:
            comm.recv(r + 1, output[(r + 1) * k:(r + 2) * k])
    if fold.new_rank(r) is not None:
        blocks = [fold.blocks(i) for i in range(fold.size)]
        super_pieces = [(pieces[b[0]][0], pieces[b[-1]][1]) for b in blocks]
        doubling_all_gather_chunks(comm, fold, output, super_pieces)
    if r < 2 * fold.extra:  # fold out: the even partner sends everything back
        if r % 2:
            comm.recv(r - 1, output)
        else:
            comm.send(r + 1, output)


def bruck_all_gather(output: torch.Tensor, input: torch.Tensor, group: Group = None,
                     tracer: Tracer | None = None) -> None:
    """Bruck's all-gather: ``⌈lg p⌉`` steps for any ``p``."""
    comm = Comm(group, tracer)
    p, k, r = comm.world_size, input.numel(), comm.rank
    _check(output, input, p)
    buf = input.new_empty(p * k)  # pieces r, r+1, ..., r+p-1 (mod p), in that order
    buf[:k].copy_(input)
    d = 1
    while d < p:
        count = min(d, p - d)
        comm.sendrecv((r - d) % p, buf[:count * k], (r + d) % p, buf[d * k:(d + count) * k])
        d *= 2
    output.copy_(torch.roll(buf, r * k))  # piece j sits at position (j - r) mod p
