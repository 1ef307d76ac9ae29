"""Reduce-scatter, simulated three ways: rank ``r`` ends with piece ``r`` reduced over all ranks.

Twin of :mod:`backends.collectives.reduce_scatter` (same names, same steps). ``nbytes`` is
``n``, the whole input of one rank (Thakur, Rabenseifner & Gropp 2005), cut into ``p``
pieces by :func:`~simulator.collectives.exchange.chunk_nbytes`. Every combination of received
data costs ``comm.reduce`` (γ per byte) exactly where the real twin adds tensors. α per message
(s), β per byte (s/B), γ per reduced byte (s/B); costs in seconds.

* :func:`ring_reduce_scatter` (Patarasuk & Yuan 2009; the first half of the book's §2.5 ring
  all-reduce) — in step ``s = 0 … p−2`` rank ``r`` sends piece ``(r − s − 1) mod p`` to
  ``r + 1``, receives piece ``(r − s − 2) mod p`` from ``r − 1`` and reduces it into its own
  copy. Piece each rank sends, and how many ranks' data it carries, ``p = 4``::

      step   rank 0    rank 1    rank 2    rank 3
        0    3 (1)     0 (1)     1 (1)     2 (1)
        1    2 (2)     3 (2)     0 (2)     1 (2)
        2    1 (3)     2 (3)     3 (3)     0 (3)     → rank r holds piece r, all 4 reduced

* :func:`recursive_halving_reduce_scatter` — in step ``d = p/2, p/4, …, 1`` rank ``r`` splits the
  block of pieces it is still responsible for in two, sends the half that ``r XOR d`` keeps (the
  upper half if bit ``d`` of ``r`` is 0) and reduces the half it keeps with the one received::

      step    rank 0      rank 1      rank 2      rank 3      (pieces still held)
      d = 2   0 1  ↔2     0 1  ↔3     2 3  ↔0     2 3  ↔1
      d = 1   0    ↔1     1    ↔0     2    ↔3     3    ↔2

  Other ``p`` fold first (:class:`~simulator.collectives.schedule.Fold`): odd rank
  ``r < 2·extra`` sends its whole input to ``r − 1``, which reduces; survivors halve over
  "super-pieces" (a survivor's piece plus its partner's) and each even partner finally sends
  piece ``r + 1`` to ``r + 1``.
* :func:`pairwise_reduce_scatter` — in step ``s = 1 … p−1`` rank ``r`` sends its piece
  ``(r + s) mod p`` to ``r + s`` and reduces the piece ``r`` received from ``r − s``.
"""

from __future__ import annotations

import math

from simulator.collectives.exchange import chunk_nbytes, posted_ahead_steps, sendrecv
from simulator.collectives.schedule import Fold
from simulator.core.comm import SimComm, SimGen


def ring_reduce_scatter_chunks(comm: SimComm, sizes: list[int]) -> SimGen:
    """Ring reduce-scatter of chunks of ``sizes`` bytes: afterwards chunk ``rank`` is reduced."""
    p, r = comm.world_size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    swaps = [(sizes[(r - step - 1) % p], sizes[(r - step - 2) % p]) for step in range(p - 1)]

    def reduce_received(step: int) -> SimGen:
        yield from comm.reduce(swaps[step][1])

    yield from posted_ahead_steps(comm, [(right, left)] * (p - 1), swaps, reduce_received)


def fold_in(comm: SimComm, fold: Fold, nbytes: int) -> SimGen:
    """MPICH's fold for reductions: odd rank ``r < 2·extra`` sends its ``nbytes`` to ``r − 1``,
    which reduces them into its own buffer."""
    r = comm.rank
    if r < 2 * fold.extra:
        if r % 2:
            yield from comm.send(r - 1, nbytes)
        else:
            yield from comm.recv(r + 1, nbytes)
            yield from comm.reduce(nbytes)


def halving_reduce_scatter_chunks(comm: SimComm, fold: Fold, sizes: list[int]) -> SimGen:
    """Recursive halving among the survivors of ``fold``: afterwards survivor ``i`` holds chunk
    ``i`` (``sizes[i]`` bytes) reduced over all survivors."""
    me = fold.new_rank(comm.rank)
    assert me is not None, "only survivors of the fold run the halving"
    lo, hi, d = 0, fold.size, fold.size // 2
    while d:
        partner = fold.old_rank(me ^ d)
        lower, upper = (lo, lo + d), (lo + d, hi)
        keep, give = (lower, upper) if me & d == 0 else (upper, lower)
        mine = sum(sizes[keep[0]:keep[1]])
        yield from sendrecv(comm, partner, sum(sizes[give[0]:give[1]]), partner, mine)
        yield from comm.reduce(mine)
        (lo, hi), d = keep, d // 2


def ring_reduce_scatter(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Ring reduce-scatter of an ``nbytes`` input: ``p − 1`` steps, one piece right each."""
    yield from ring_reduce_scatter_chunks(comm, chunk_nbytes(nbytes, comm.world_size, itemsize))


def ring_reduce_scatter_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                             gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`ring_reduce_scatter`: ``(p−1)·α + n·(p−1)/p·(β + γ)`` seconds."""
    return (p - 1) * alpha_s + nbytes * (p - 1) / p * (beta_s_per_B + gamma_s_per_B)


def recursive_halving_reduce_scatter(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Recursive-halving reduce-scatter (folded for non-power-of-two ``p``)."""
    p, r = comm.world_size, comm.rank
    fold, pieces = Fold(p), chunk_nbytes(nbytes, p, itemsize)
    yield from fold_in(comm, fold, sum(pieces))
    if fold.new_rank(r) is not None:
        super_pieces = [sum(pieces[j] for j in fold.blocks(i)) for i in range(fold.size)]
        yield from halving_reduce_scatter_chunks(comm, fold, super_pieces)
    if r < 2 * fold.extra:  # fold out: the even partner sends the odd one its piece
        if r % 2:
            yield from comm.recv(r - 1, pieces[r])
        else:
            yield from comm.send(r + 1, pieces[r + 1])


def recursive_halving_reduce_scatter_cost(p: int, nbytes: float, alpha_s: float,
                                          beta_s_per_B: float,
                                          gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`recursive_halving_reduce_scatter`, ``p = 2^k``, seconds::

        lg p·α + n·(p−1)/p·(β + γ)          (halves of n/2, n/4, …, n/p bytes)
    """
    return math.log2(p) * alpha_s + nbytes * (p - 1) / p * (beta_s_per_B + gamma_s_per_B)


def pairwise_reduce_scatter(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Pairwise-exchange reduce-scatter: ``p − 1`` steps, each rank's piece comes directly."""
    p, r = comm.world_size, comm.rank
    pieces = chunk_nbytes(nbytes, p, itemsize)
    for step in range(1, p):
        dst, src = (r + step) % p, (r - step) % p
        yield from sendrecv(comm, dst, pieces[dst], src, pieces[r])
        yield from comm.reduce(pieces[r])


def pairwise_reduce_scatter_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                                 gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`pairwise_reduce_scatter`: ``(p−1)·α + n·(p−1)/p·(β + γ)`` s."""
    return ring_reduce_scatter_cost(p, nbytes, alpha_s, beta_s_per_B, gamma_s_per_B)
