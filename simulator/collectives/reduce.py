"""Reduce, simulated three ways: the root ``dst`` ends with every rank's ``n`` bytes combined.

Twin of :mod:`backends.collectives.reduce` (same names, same steps); book §2.3. Ranks are seen
relative to the root, ``v = (r − dst) mod p``. Every combination costs ``comm.reduce`` (γ per
byte) exactly where the real twin adds tensors. Costs from Thakur, Rabenseifner & Gropp 2005:
α per message (s), β per byte (s/B), γ per reduced byte (s/B), results in seconds.

* :func:`linear_reduce` — the root receives every other rank's buffer, from ranks ``0, 1, …,
  p−1`` in turn, and reduces each.
* :func:`binomial_reduce` — in step ``m = 1, 2, 4, …`` rank ``v`` receives from ``v + m`` (if it
  exists) and reduces, until at ``v``'s lowest set bit it sends its partial result to ``v − m``.
  ``p = 4``, root 0::

      step   messages         partial sums held
       1     1→0, 3→2         0+1  ·  2+3  ·
       2     2→0              0+1+2+3

* :func:`rabenseifner_reduce` — reduce-scatter by recursive halving
  (:mod:`~simulator.collectives.reduce_scatter`) over ``p'`` chunks, then a binomial gather of
  the reduced chunks to the root: in step ``d = 1, 2, 4, …`` the rank whose bit ``d`` differs
  from the root's sends its block of ``d`` chunks to ``r XOR d`` and stops; the other receives.
  ``p = 4``, root 0, after the halving (rank ``r`` holds reduced chunk ``r``)::

      step   messages                    chunks at the root
      d = 1  1→0: chunk 1, 3→2: chunk 3  0 1
      d = 2  2→0: chunks 2 3             0 1 2 3

  Other ``p`` fold first as MPICH does (:class:`~simulator.collectives.schedule.Fold`); when the
  root is an odd rank that sits out, its even partner ``dst − 1`` gathers instead and finally
  sends it the result.
"""

from __future__ import annotations

import math

from simulator.collectives.exchange import buffer_nbytes, chunk_nbytes
from simulator.collectives.reduce_scatter import fold_in, halving_reduce_scatter_chunks
from simulator.collectives.schedule import Fold
from simulator.core.comm import SimComm, SimGen


def linear_reduce(comm: SimComm, nbytes: int, dst: int = 0, itemsize: int = 4) -> SimGen:
    """The root receives and reduces every other rank's ``nbytes`` in turn."""
    n = buffer_nbytes(nbytes, itemsize)
    if comm.rank != dst:
        yield from comm.send(dst, n)
        return
    for src in range(comm.world_size):
        if src != dst:
            yield from comm.recv(src, n)
            yield from comm.reduce(n)


def linear_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                       gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`linear_reduce` in the pure α-β model, seconds::

        α + n·β + (p−1)·n·γ

    The ``p − 1`` senders all send at once, and without contention their buffers arrive
    together; only the root's reductions queue. The one-port textbook figure
    ``(p−1)·(α + n·β + n·γ)`` assumes the root takes one message at a time; the simulation
    shows the bandwidth half of it when the root's port is shared (``fair`` on a switch).
    """
    if p == 1:
        return 0.0
    return alpha_s + nbytes * beta_s_per_B + (p - 1) * nbytes * gamma_s_per_B


def binomial_reduce(comm: SimComm, nbytes: int, dst: int = 0, itemsize: int = 4) -> SimGen:
    """Reduce up a binomial tree rooted at ``dst``: ``⌈lg p⌉`` rounds of whole messages."""
    n = buffer_nbytes(nbytes, itemsize)
    p = comm.world_size
    v, mask = (comm.rank - dst) % p, 1
    while mask < p:
        if v & mask:  # my subtree is reduced: pass it to my parent v - mask
            yield from comm.send((comm.rank - mask) % p, n)
            return
        if v + mask < p:  # reduce the child v + mask's subtree into mine
            yield from comm.recv((comm.rank + mask) % p, n)
            yield from comm.reduce(n)
        mask <<= 1


def binomial_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                         gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`binomial_reduce`, ``p = 2^k``: ``lg p·(α + n·β + n·γ)`` seconds.

    For other ``p`` it is an upper bound: a short subtree may deliver early.
    """
    return math.log2(p) * (alpha_s + nbytes * (beta_s_per_B + gamma_s_per_B))


def rabenseifner_reduce(comm: SimComm, nbytes: int, dst: int = 0, itemsize: int = 4) -> SimGen:
    """Rabenseifner's reduce: recursive-halving reduce-scatter, then binomial gather."""
    n = buffer_nbytes(nbytes, itemsize)
    p, r = comm.world_size, comm.rank
    fold = Fold(p)
    gatherer = dst - 1 if fold.new_rank(dst) is None else dst  # a survivor
    yield from fold_in(comm, fold, n)
    me, new_root = fold.new_rank(r), fold.new_rank(gatherer)
    if me is not None:
        assert new_root is not None
        sizes = chunk_nbytes(n, fold.size, itemsize)
        yield from halving_reduce_scatter_chunks(comm, fold, sizes)
        d = 1  # binomial gather to new_root: survivor me holds chunks [me, me+1), then more
        while d < fold.size:
            partner = me ^ d
            if me & d != new_root & d:
                mine = me - me % d
                yield from comm.send(fold.old_rank(partner), sum(sizes[mine:mine + d]))
                break
            theirs = partner - partner % d
            yield from comm.recv(fold.old_rank(partner), sum(sizes[theirs:theirs + d]))
            d *= 2
    if gatherer != dst and r in (dst, gatherer):  # the root sat out: hand it the result
        if r == gatherer:
            yield from comm.send(dst, n)
        else:
            yield from comm.recv(gatherer, n)


def rabenseifner_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                             gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`rabenseifner_reduce`, ``p = 2^k``, seconds::

        2·lg p·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ

    the recursive-halving reduce-scatter plus a binomial gather of the ``p`` reduced chunks.
    """
    share = nbytes * (p - 1) / p
    return 2 * math.log2(p) * alpha_s + 2 * share * beta_s_per_B + share * gamma_s_per_B
