"""All-gather, simulated three ways: every rank ends with every rank's piece (book §2.3).

Twin of :mod:`backends.collectives.all_gather` (same names, same steps). ``nbytes`` is ``n``,
the bytes gathered per rank (Thakur, Rabenseifner & Gropp 2005): ``p`` pieces cut by
:func:`~simulator.collectives.exchange.chunk_nbytes`, piece ``j`` contributed by rank ``j``.
α per message (s), β per byte (s/B); costs in seconds.

* :func:`ring_all_gather` (Patarasuk & Yuan 2009) — in step ``s = 0 … p−2`` rank ``r`` sends
  piece ``(r − s) mod p`` to ``r + 1`` and receives piece ``(r − s − 1) mod p`` from ``r − 1``.
  Pieces held, ``p = 4``::

      after step   rank 0    rank 1    rank 2    rank 3
        start      0         1         2         3
          0        0 3       1 0       2 1       3 2
          1        0 3 2     1 0 3     2 1 0     3 2 1
          2        all       all       all       all

* :func:`recursive_doubling_all_gather` — in step ``d = 1, 2, 4, …`` rank ``r`` swaps all it
  has, the ``d`` pieces of the aligned block ``[⌊r/d⌋·d, ⌊r/d⌋·d + d)``, with ``r XOR d``::

      after step   rank 0    rank 1    rank 2    rank 3
        d = 1      0 1       0 1       2 3       2 3
        d = 2      all       all       all       all

  Other ``p`` fold first (:class:`~simulator.collectives.schedule.Fold`): odd rank
  ``r < 2·extra`` sends its piece to ``r − 1``, the ``p'`` survivors run the doubling on
  "super-pieces" (a survivor's own piece plus its partner's), and each even partner finally
  sends the whole result, ``n`` bytes, to ``r + 1``.
* :func:`bruck_all_gather` (Bruck et al. 1997) — any ``p``: rank ``r`` keeps pieces in the order
  ``r, r+1, …``; in step ``d = 1, 2, 4, …`` it sends its first ``min(d, p−d)`` pieces to
  ``r − d`` and appends as many from ``r + d``::

      after step   rank 0    rank 1    rank 2    rank 3
        d = 1      0 1       1 2       2 3       3 0
        d = 2      all       all       all       all

  The final local rotation into rank order is a copy the closed form does not count, and
  neither does the simulation.
"""

from __future__ import annotations

import math

from simulator.collectives.exchange import chunk_nbytes, posted_ahead_steps, sendrecv
from simulator.collectives.schedule import Fold
from simulator.core.comm import SimComm, SimGen


def ring_all_gather_chunks(comm: SimComm, sizes: list[int], mine: int) -> SimGen:
    """Ring all-gather of chunks of ``sizes`` bytes: each rank holds chunk ``mine``, then all.

    ``mine`` is ``rank`` for an all-gather and ``rank − root`` for a broadcast; step ``s``
    sends chunk ``mine − s`` right and receives chunk ``mine − s − 1`` from the left.
    """
    p = comm.world_size
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p
    yield from posted_ahead_steps(
        comm, [(right, left)] * (p - 1),
        [(sizes[(mine - step) % p], sizes[(mine - step - 1) % p]) for step in range(p - 1)])


def doubling_all_gather_chunks(comm: SimComm, fold: Fold, sizes: list[int]) -> SimGen:
    """Recursive doubling among the survivors of ``fold``: survivor ``i`` holds ``sizes[i]``
    bytes, and in step ``d`` swaps its aligned block of ``d`` chunks with ``i XOR d``."""
    me, d = fold.new_rank(comm.rank), 1
    assert me is not None, "only survivors of the fold run the doubling"
    while d < fold.size:
        partner = me ^ d
        mine, theirs = me - me % d, partner - partner % d
        yield from sendrecv(comm, fold.old_rank(partner), sum(sizes[mine:mine + d]),
                            fold.old_rank(partner), sum(sizes[theirs:theirs + d]))
        d *= 2


def ring_all_gather(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Ring all-gather of ``nbytes`` in all: ``p − 1`` steps, one piece right each."""
    sizes = chunk_nbytes(nbytes, comm.world_size, itemsize)
    yield from ring_all_gather_chunks(comm, sizes, mine=comm.rank)


def ring_all_gather_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                         gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`ring_all_gather`: ``(p−1)·α + n·(p−1)/p·β`` seconds."""
    return (p - 1) * alpha_s + nbytes * (p - 1) / p * beta_s_per_B


def recursive_doubling_all_gather(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Recursive-doubling all-gather (folded for non-power-of-two ``p``)."""
    p, r = comm.world_size, comm.rank
    fold, pieces = Fold(p), chunk_nbytes(nbytes, p, itemsize)
    if r < 2 * fold.extra:  # fold in: odd ranks hand their piece to the even partner
        if r % 2:
            yield from comm.send(r - 1, pieces[r])
        else:
            yield from comm.recv(r + 1, pieces[r + 1])
    if fold.new_rank(r) is not None:
        super_pieces = [sum(pieces[j] for j in fold.blocks(i)) for i in range(fold.size)]
        yield from doubling_all_gather_chunks(comm, fold, super_pieces)
    if r < 2 * fold.extra:  # fold out: the even partner sends everything back
        if r % 2:
            yield from comm.recv(r - 1, sum(pieces))
        else:
            yield from comm.send(r + 1, sum(pieces))


def recursive_doubling_all_gather_cost(p: int, nbytes: float, alpha_s: float,
                                       beta_s_per_B: float, gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`recursive_doubling_all_gather`, ``p = 2^k``, seconds::

        lg p·α + n·(p−1)/p·β
    """
    return math.log2(p) * alpha_s + nbytes * (p - 1) / p * beta_s_per_B


def bruck_all_gather(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Bruck's all-gather: ``⌈lg p⌉`` steps for any ``p``."""
    p, r = comm.world_size, comm.rank
    pieces = chunk_nbytes(nbytes, p, itemsize)
    held = pieces[r:] + pieces[:r]  # position i: the piece of rank r + i
    d = 1
    while d < p:
        count = min(d, p - d)
        theirs = pieces[(r + d) % p:] + pieces[:(r + d) % p]
        yield from sendrecv(comm, (r - d) % p, sum(held[:count]),
                            (r + d) % p, sum(theirs[:count]))
        d *= 2


def bruck_all_gather_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                          gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`bruck_all_gather`: ``⌈lg p⌉·α + n·(p−1)/p·β`` seconds, any ``p``.

    Steps move ``1, 2, 4, …`` pieces and the last one ``p − 2^⌊lg(p−1)⌋``: ``p − 1`` in all.
    """
    return (p - 1).bit_length() * alpha_s + nbytes * (p - 1) / p * beta_s_per_B
