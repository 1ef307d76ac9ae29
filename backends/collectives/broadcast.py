"""Broadcast on real processes, four ways, from scratch on point-to-point messages (book §2.3).

Twin of :mod:`simulator.collectives.broadcast` (same names, same steps). The root ``src`` holds
``n`` bytes in ``tensor``; afterwards every rank does, as with ``dist.broadcast(tensor, src)``.
Ranks are seen relative to the root, ``v = (r − src) mod p``. Costs are Thakur, Rabenseifner &
Gropp 2005 (§4.1), α per message, β per byte:

* :func:`linear_broadcast` — the root sends the whole buffer to ranks ``0, 1, …, p−1`` in turn
  (skipping itself): ``(p−1)·(α + n·β)``.
* :func:`binomial_broadcast` — rank ``v`` with lowest set bit ``m`` receives from ``v − m``,
  then sends to ``v + m/2, v + m/4, …, v + 1``; the root sends to ``v + 2^⌊lg(p−1)⌋, …, 2, 1``:
  ``⌈lg p⌉·(α + n·β)``.
* :func:`pipelined_chain_broadcast` — ranks form the chain ``v = 0 → 1 → … → p−1`` and the
  buffer is cut into segments of ``segment_bytes``; for each segment in order, a rank receives
  it from ``v − 1`` and sends it to ``v + 1``. With ``s`` segments of ``n/s`` bytes:
  ``(p − 2 + s)·(α + n/s·β)``. The next segment's receive is posted before the current one is
  forwarded, so receiving and sending overlap as the simulator's eager sends do.
* :func:`scatter_allgather_broadcast` (van de Geijn; Barnett et al. 1994) — cut the buffer into
  ``p`` chunks (:func:`~simulator.collectives.chunks.chunk_bounds`; chunk ``v`` belongs to
  relative rank ``v``), binomial scatter (:mod:`~backends.collectives.scatter_gather`), then
  ring all-gather (:mod:`~backends.collectives.all_gather`):
  ``(⌈lg p⌉ + p − 1)·α + 2·n·(p−1)/p·β``.
"""

from __future__ import annotations

import torch

from backends.collectives.all_gather import ring_all_gather_chunks
from backends.collectives.comm import Comm, Group, check_flat
from backends.collectives.scatter_gather import binomial_scatter_chunks
from backends.trace import Tracer
from simulator.collectives.chunks import chunk_bounds

SEGMENT_BYTES = 64 * 1024
"""Default segment of the pipelined chain, bytes."""


def linear_broadcast(tensor: torch.Tensor, src: int, group: Group = None,
                     tracer: Tracer | None = None) -> None:
    """The root sends ``tensor`` to every other rank in turn; like ``dist.broadcast``."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    root = comm.team_rank(src)
    if comm.rank != root:
        comm.recv(root, tensor)
        return
    for dst in range(comm.world_size):
        if dst != root:
            comm.send(dst, tensor)


def binomial_broadcast(tensor: torch.Tensor, src: int, group: Group = None,
                       tracer: Tracer | None = None) -> None:
    """Broadcast down a binomial tree rooted at ``src``: ``⌈lg p⌉`` rounds of whole messages."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    p = comm.world_size
    v, mask = (comm.rank - comm.team_rank(src)) % p, 1
    while mask < p:  # receive from my parent v - (lowest set bit of v)
        if v & mask:
            comm.recv((comm.rank - mask) % p, tensor)
            break
        mask <<= 1
    mask >>= 1
    while mask:  # send to my children v + mask, largest subtree first
        if v + mask < p:
            comm.send((comm.rank + mask) % p, tensor)
        mask >>= 1


def pipelined_chain_broadcast(tensor: torch.Tensor, src: int,
                              segment_bytes: int = SEGMENT_BYTES, group: Group = None,
                              tracer: Tracer | None = None) -> None:
    """Pass ``segment_bytes`` segments down the chain ``src → src+1 → …``, pipelined."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    p = comm.world_size
    v = (comm.rank - comm.team_rank(src)) % p
    step = max(1, segment_bytes // tensor.element_size())
    segments = [tensor[lo:lo + step] for lo in range(0, tensor.numel(), step)]
    left, right = (comm.rank - 1) % p, (comm.rank + 1) % p
    ahead = comm.irecv(left, segments[0]) if v > 0 and segments else None
    for i, segment in enumerate(segments):
        if ahead is not None:  # segment i has arrived; post the receive of segment i+1
            ahead.wait()
            ahead = comm.irecv(left, segments[i + 1]) if i + 1 < len(segments) else None
        if v < p - 1:
            comm.send(right, segment)


def scatter_allgather_broadcast(tensor: torch.Tensor, src: int, group: Group = None,
                                tracer: Tracer | None = None) -> None:
    """van de Geijn's broadcast: binomial scatter of ``p`` chunks, then ring all-gather."""
    comm = Comm(group, tracer)
    check_flat(tensor)
    root = comm.team_rank(src)
    bounds = chunk_bounds(tensor.numel(), comm.world_size)
    binomial_scatter_chunks(comm, tensor, bounds, root)
    ring_all_gather_chunks(comm, tensor, bounds, mine=(comm.rank - root) % comm.world_size)
