"""Scatter and gather, simulated: the root deals out (collects) one piece per rank (book §2.3).

Twin of :mod:`backends.collectives.scatter_gather` (same names, same steps). ``nbytes`` is the
root's whole buffer, ``n`` in Thakur, Rabenseifner & Gropp 2005: ``p`` pieces cut by
:func:`~simulator.collectives.exchange.chunk_nbytes`, piece ``j`` for rank ``j``.

* **linear** — the root sends (receives) each piece itself, to (from) ranks ``0, 1, …, p−1`` in
  turn, skipping itself.
* **binomial** — in relative ranks ``v = (r − root) mod p``, rank ``v`` with lowest set bit ``m``
  receives the pieces of its whole subtree, ``[v, v+m)``, from ``v − m``; then for ``m/2, m/4,
  …, 1`` it hands ``[v+m', v+2m')`` to ``v + m'`` (the root starts with the largest ``m'`` below
  ``p``). Gather runs the same tree upwards. For ``p = 4``, root 0, the pieces each rank is
  responsible for after each step of the scatter (the gather is this table read bottom-up with
  the arrows reversed)::

      step   messages              rank 0     rank 1   rank 2   rank 3
       0     —                     0 1 2 3    ·        ·        ·
       1     0→2: pieces 2 3       0 1        ·        2 3      ·
       2     0→1: 1,  2→3: 3       0          1        2        3

Units: seconds, bytes; α per message (s), β per byte (s/B).
"""

from __future__ import annotations

import math

from simulator.collectives.exchange import chunk_nbytes
from simulator.core.comm import SimComm, SimGen


def binomial_scatter_chunks(comm: SimComm, sizes: list[int], root: int) -> SimGen:
    """Binomial scatter of chunks of ``sizes`` bytes: relative rank ``v`` ends with ``sizes[v]``."""
    p = comm.world_size
    v, mask = (comm.rank - root) % p, 1
    while mask < p:  # receive my subtree [v, v+mask) from my parent v - mask
        if v & mask:
            yield from comm.recv((comm.rank - mask) % p, sum(sizes[v:v + mask]))
            break
        mask <<= 1
    mask >>= 1
    while mask:  # hand the subtree [v+mask, v+2·mask) to the child v + mask
        if v + mask < p:
            yield from comm.send((comm.rank + mask) % p, sum(sizes[v + mask:v + 2 * mask]))
        mask >>= 1


def binomial_gather_chunks(comm: SimComm, sizes: list[int], root: int) -> SimGen:
    """Binomial gather of chunks of ``sizes`` bytes: the root ends with every ``sizes[v]``."""
    p = comm.world_size
    v, mask = (comm.rank - root) % p, 1
    while mask < p:
        if v & mask:  # my subtree [v, v+mask) is complete: pass it to my parent
            yield from comm.send((comm.rank - mask) % p, sum(sizes[v:v + mask]))
            break
        if v + mask < p:  # collect the child v + mask's subtree
            yield from comm.recv((comm.rank + mask) % p, sum(sizes[v + mask:v + 2 * mask]))
        mask <<= 1


def linear_scatter(comm: SimComm, nbytes: int, src: int = 0, itemsize: int = 4) -> SimGen:
    """The root ``src`` sends piece ``j`` of its ``nbytes`` buffer to rank ``j``, in turn."""
    pieces = chunk_nbytes(nbytes, comm.world_size, itemsize)
    if comm.rank != src:
        yield from comm.recv(src, pieces[comm.rank])
        return
    for dst in range(comm.world_size):
        if dst != src:
            yield from comm.send(dst, pieces[dst])


def linear_scatter_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                        gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`linear_scatter`: ``(p−1)·(α + (n/p)·β)`` seconds.

    The root's sends are one after another, so their latencies add up.
    """
    return (p - 1) * (alpha_s + nbytes / p * beta_s_per_B)


def binomial_scatter(comm: SimComm, nbytes: int, src: int = 0, itemsize: int = 4) -> SimGen:
    """Scatter the root's ``nbytes`` down a binomial tree rooted at ``src``."""
    yield from binomial_scatter_chunks(comm, chunk_nbytes(nbytes, comm.world_size, itemsize),
                                       src)


def binomial_scatter_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                          gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`binomial_scatter`, ``p = 2^k``: ``lg p·α + n·(p−1)/p·β`` seconds.

    The root sends ``n/2, n/4, …, n/p`` bytes (Thakur, Rabenseifner & Gropp 2005).
    """
    return math.log2(p) * alpha_s + nbytes * (p - 1) / p * beta_s_per_B


def linear_gather(comm: SimComm, nbytes: int, dst: int = 0, itemsize: int = 4) -> SimGen:
    """The root ``dst`` receives piece ``j`` from rank ``j``, in turn."""
    pieces = chunk_nbytes(nbytes, comm.world_size, itemsize)
    if comm.rank != dst:
        yield from comm.send(dst, pieces[comm.rank])
        return
    for src in range(comm.world_size):
        if src != dst:
            yield from comm.recv(src, pieces[src])


def linear_gather_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                       gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`linear_gather` in the pure α-β model: ``α + (n/p)·β`` seconds.

    Unlike the scatter, nothing orders the ``p − 1`` senders: they all send at once, and
    without contention their messages arrive together. The one-port textbook figure
    ``(p−1)·(α + (n/p)·β)`` assumes the root takes one message at a time; the simulation shows
    the bandwidth half of it when the root's port is shared (``fair`` on a switch:
    ``α + (p−1)·(n/p)·β``).
    """
    return 0.0 if p == 1 else alpha_s + nbytes / p * beta_s_per_B


def binomial_gather(comm: SimComm, nbytes: int, dst: int = 0, itemsize: int = 4) -> SimGen:
    """Gather ``nbytes`` in all up a binomial tree rooted at ``dst``."""
    yield from binomial_gather_chunks(comm, chunk_nbytes(nbytes, comm.world_size, itemsize),
                                      dst)


def binomial_gather_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                         gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`binomial_gather`, ``p = 2^k``: ``lg p·α + n·(p−1)/p·β`` seconds.

    The root receives ``n/p, 2n/p, …, n/2`` bytes (Thakur, Rabenseifner & Gropp 2005).
    """
    return binomial_scatter_cost(p, nbytes, alpha_s, beta_s_per_B)
