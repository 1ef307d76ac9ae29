"""All-to-all, simulated two ways: piece ``j`` of every rank's buffer goes to rank ``j``.

Twin of :mod:`backends.collectives.all_to_all` (same names, same steps); book §2.3.
``nbytes`` is ``n``, the bytes one rank sends (its whole input; Thakur, Rabenseifner & Gropp
2005), cut into ``p`` pieces by :func:`~simulator.collectives.exchange.chunk_nbytes`, piece
``j`` for rank ``j``. α per message (s), β per byte (s/B); costs in seconds.

* :func:`pairwise_all_to_all` — in step ``s = 1 … p−1`` rank ``r`` swaps pieces with one peer:
  ``r XOR s`` when ``p`` is a power of two, otherwise it sends to ``r + s`` and receives from
  ``r − s``. ``p = 4``::

      step   pairs
       1     0↔1  2↔3
       2     0↔2  1↔3
       3     0↔3  1↔2

* :func:`bruck_all_to_all` (Bruck et al. 1997) — rotate the pieces locally so that position
  ``i`` holds the piece for rank ``r + i``; in step ``d = 1, 2, 4, …`` send the pieces at every
  position with bit ``d`` set to ``r + d`` (packed into one message) and put the ones received
  from ``r − d`` in their place; finally position ``i`` holds the piece from rank ``r − i``.
  ``p = 4``: step ``d = 1`` moves positions 1 and 3, step ``d = 2`` positions 2 and 3 — the
  piece for ``r + 3`` travels twice. The local rotations are copies the closed form does not
  count, and neither does the simulation.
"""

from __future__ import annotations

from simulator.collectives.exchange import chunk_nbytes, sendrecv
from simulator.core.comm import SimComm, SimGen


def pairwise_all_to_all(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Pairwise exchange: ``p − 1`` steps, one peer each."""
    p, r = comm.world_size, comm.rank
    pieces = chunk_nbytes(nbytes, p, itemsize)
    for step in range(1, p):
        dst, src = ((r ^ step, r ^ step) if p & (p - 1) == 0
                    else ((r + step) % p, (r - step) % p))
        yield from sendrecv(comm, dst, pieces[dst], src, pieces[r])


def pairwise_all_to_all_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                             gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`pairwise_all_to_all`: ``(p−1)·α + n·(p−1)/p·β`` seconds.

    Thakur et al. write ``(p−1)·α + n·β``, counting as ``n`` only what leaves the rank; here
    ``n`` is the whole input, whose own piece stays home.
    """
    return (p - 1) * alpha_s + nbytes * (p - 1) / p * beta_s_per_B


def _destination(position: int, holder: int, d: int, p: int) -> int:
    """Where the piece at ``position`` on rank ``holder`` is going, before Bruck's step ``d``.

    It left its source ``holder − (position mod d)`` bound for ``source + position``.
    """
    return (holder + position - position % d) % p


def bruck_all_to_all(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Bruck's all-to-all: ``⌈lg p⌉`` steps, each moving about half the pieces."""
    p, r = comm.world_size, comm.rank
    pieces = chunk_nbytes(nbytes, p, itemsize)  # a piece's size depends on its destination
    d = 1
    while d < p:
        moving = [i for i in range(p) if i & d]
        send = sum(pieces[_destination(i, r, d, p)] for i in moving)
        recv = sum(pieces[_destination(i, (r - d) % p, d, p)] for i in moving)
        yield from sendrecv(comm, (r + d) % p, send, (r - d) % p, recv)
        d *= 2


def bruck_all_to_all_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                          gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`bruck_all_to_all`, seconds, any ``p``::

        Σ over d = 1, 2, 4, … < p of  α + |{i < p : i has bit d}|·(n/p)·β

    which for ``p = 2^k`` (``p/2`` pieces every step) is Thakur et al.'s
    ``lg p·α + (n/2)·lg p·β``.
    """
    total, d = 0.0, 1
    while d < p:
        moving = sum(1 for i in range(p) if i & d)
        total += alpha_s + moving * nbytes / p * beta_s_per_B
        d *= 2
    return total
