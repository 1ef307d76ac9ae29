"""Broadcast, simulated four ways: one root's ``n`` bytes reach every rank (book §2.3).

Twin of :mod:`backends.collectives.broadcast` (same names, same steps). Ranks are seen relative
to the root, ``v = (r − src) mod p``. Costs from Thakur, Rabenseifner & Gropp 2005:
α per message (s), β per byte (s/B), ``n = nbytes`` (B); results in seconds.

* :func:`linear_broadcast` — the root sends the whole buffer to ranks ``0, 1, …, p−1`` in turn
  (skipping itself): the naive one-to-all of :mod:`~simulator.collectives.point_to_point`.
* :func:`binomial_broadcast` — rank ``v`` with lowest set bit ``m`` receives from ``v − m``,
  then sends to ``v + m/2, v + m/4, …, v + 1``; the root sends to ``v + 2^⌈lg p⌉/2, …, 2, 1``.
  Who has the data after each step, ``p = 4``, root 0::

      step   messages       ranks holding the data
       1     0→2            0 · 2 ·
       2     0→1, 2→3       0 1 2 3

* :func:`pipelined_chain_broadcast` — the chain ``v = 0 → 1 → … → p−1``, the buffer cut into
  segments of ``segment_bytes``; for each segment in order a rank receives it from ``v − 1``
  and sends it on to ``v + 1``. The receive of the next segment is posted before the current
  one is forwarded, so segment ``s+1`` comes in while segment ``s`` goes out. ``p = 4``, three
  segments ``a b c``, one time slot = one segment over one link::

      slot   0→1   1→2   2→3
       1      a
       2      b     a
       3      c     b     a
       4            c     b
       5                  c         (p − 2 + s slots)

* :func:`scatter_allgather_broadcast` (van de Geijn; Barnett et al. 1994) — cut the buffer into
  ``p`` chunks (:func:`~simulator.collectives.exchange.chunk_nbytes`; chunk ``v`` belongs to
  relative rank ``v``), binomial scatter (:mod:`~simulator.collectives.scatter_gather`), then
  ring all-gather (:mod:`~simulator.collectives.all_gather`). ``p = 4``, root 0: after the
  scatter rank ``v`` holds chunk ``v`` (table in ``scatter_gather``); the ring then runs as in
  ``all_gather``.
"""

from __future__ import annotations

import math

from simulator.collectives.all_gather import ring_all_gather_chunks
from simulator.collectives.exchange import buffer_nbytes, chunk_nbytes
from simulator.collectives.point_to_point import one_to_all, one_to_all_cost
from simulator.collectives.scatter_gather import binomial_scatter_chunks
from simulator.core.comm import SimComm, SimGen, SimWork

SEGMENT_BYTES = 64 * 1024
"""Default segment of the pipelined chain, bytes."""


def linear_broadcast(comm: SimComm, nbytes: int, src: int = 0, itemsize: int = 4) -> SimGen:
    """The root sends ``nbytes`` to every other rank in turn, each send ending before the next."""
    yield from one_to_all(comm, buffer_nbytes(nbytes, itemsize), src)


def linear_broadcast_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                          gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`linear_broadcast`: ``(p−1)·(α + n·β)`` seconds."""
    return one_to_all_cost(p, nbytes, alpha_s, beta_s_per_B)


def binomial_broadcast(comm: SimComm, nbytes: int, src: int = 0, itemsize: int = 4) -> SimGen:
    """Broadcast down a binomial tree rooted at ``src``: ``⌈lg p⌉`` rounds of whole messages."""
    n = buffer_nbytes(nbytes, itemsize)
    p = comm.world_size
    v, mask = (comm.rank - src) % p, 1
    while mask < p:  # receive from my parent v - (lowest set bit of v)
        if v & mask:
            yield from comm.recv((comm.rank - mask) % p, n)
            break
        mask <<= 1
    mask >>= 1
    while mask:  # send to my children v + mask, largest subtree first
        if v + mask < p:
            yield from comm.send((comm.rank + mask) % p, n)
        mask >>= 1


def binomial_broadcast_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                            gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`binomial_broadcast`: ``⌈lg p⌉·(α + n·β)`` seconds.

    Thakur et al. write ``lg p`` for ``p = 2^k``; the root sends ``⌈lg p⌉`` times for any ``p``
    and nobody finishes after it, so the ceiling makes the form exact for every ``p``.
    """
    return (p - 1).bit_length() * (alpha_s + nbytes * beta_s_per_B)


def segment_nbytes(nbytes: int, segment_bytes: int, itemsize: int) -> list[int]:
    """Bytes of the chain's segments: whole elements, ``segment_bytes`` each but the last.

    Like the real twin, a segment holds ``max(1, segment_bytes // itemsize)`` elements, and an
    empty buffer has no segments at all.
    """
    count = buffer_nbytes(nbytes, itemsize) // itemsize
    step = max(1, segment_bytes // itemsize)
    return [min(step, count - lo) * itemsize for lo in range(0, count, step)]


def pipelined_chain_broadcast(comm: SimComm, nbytes: int, src: int = 0,
                              segment_bytes: int = SEGMENT_BYTES, itemsize: int = 4) -> SimGen:
    """Pass ``segment_bytes`` segments down the chain ``src → src+1 → …``, pipelined."""
    p = comm.world_size
    v = (comm.rank - src) % p
    segments = segment_nbytes(nbytes, segment_bytes, itemsize)
    left, right = (comm.rank - 1) % p, (comm.rank + 1) % p
    ahead: SimWork | None = comm.irecv(left, segments[0]) if v > 0 and segments else None
    for i, segment in enumerate(segments):
        if ahead is not None:  # segment i has arrived; post the receive of segment i+1
            yield ahead.wait()
            ahead = comm.irecv(left, segments[i + 1]) if i + 1 < len(segments) else None
        if v < p - 1:
            yield from comm.send(right, segment)


def pipelined_chain_broadcast_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                                   gamma_s_per_B: float = 0.0,
                                   segment_bytes: int = SEGMENT_BYTES) -> float:
    """Closed form of :func:`pipelined_chain_broadcast`, seconds.

    With ``s = ⌈n/b⌉`` segments of ``b = min(segment_bytes, n)`` bytes (the last one ``b'``
    bytes), the last segment leaves the root after ``s − 1`` slots and is held up behind a full
    segment at every hop (Pješivac-Grbović et al., "Performance analysis of MPI collective
    operations", Cluster Computing 2007)::

        (s + p − 3)·(α + b·β) + α + b'·β        = (p − 2 + s)·(α + (n/s)·β) when b' = b

    ``segment_bytes`` should be a multiple of the item size, as the simulation cuts elements.
    """
    if p == 1 or nbytes == 0:
        return 0.0
    b = min(segment_bytes, nbytes)
    s = math.ceil(nbytes / b)
    last = nbytes - (s - 1) * b
    return (s + p - 3) * (alpha_s + b * beta_s_per_B) + alpha_s + last * beta_s_per_B


def scatter_allgather_broadcast(comm: SimComm, nbytes: int, src: int = 0,
                                itemsize: int = 4) -> SimGen:
    """van de Geijn's broadcast: binomial scatter of ``p`` chunks, then ring all-gather."""
    chunks = chunk_nbytes(nbytes, comm.world_size, itemsize)
    yield from binomial_scatter_chunks(comm, chunks, src)
    yield from ring_all_gather_chunks(comm, chunks, mine=(comm.rank - src) % comm.world_size)


def scatter_allgather_broadcast_cost(p: int, nbytes: float, alpha_s: float,
                                     beta_s_per_B: float, gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`scatter_allgather_broadcast`, ``p = 2^k``, seconds::

        (lg p + p − 1)·α + 2·n·(p−1)/p·β

    The scatter's last piece and the ring's first step line up, so the two costs just add
    (Thakur, Rabenseifner & Gropp 2005).
    """
    return ((math.log2(p) + p - 1) * alpha_s
            + 2 * nbytes * (p - 1) / p * beta_s_per_B)
