"""All-reduce, simulated eight ways: every rank ends with all ranks' ``n`` bytes combined.

Twin of :mod:`backends.collectives.all_reduce` (same names, same steps); book §2.4–2.5. Every
combination costs ``comm.reduce`` (γ per byte) exactly where the real twin adds tensors. Costs
from Thakur, Rabenseifner & Gropp 2005: α per message (s), β per byte (s/B), γ per
reduced byte (s/B), results in seconds. Where an algorithm needs ``p = 2^k``, other ``p`` fold
first, MPICH's way (:class:`~simulator.collectives.schedule.Fold`): odd rank ``r < 2·extra``
sends its buffer to ``r − 1``, which reduces; at the end ``r − 1`` sends the result back to ``r``.

* :func:`reduce_broadcast_all_reduce` — the parameter-server shape: binomial reduce to rank 0,
  then binomial broadcast from it (:mod:`~simulator.collectives.reduce`,
  :mod:`~simulator.collectives.broadcast`).
* :func:`ring_all_reduce` (Patarasuk & Yuan 2009; book §2.5) — ring reduce-scatter then ring
  all-gather over ``p`` chunks. Chunk each rank sends, ``p = 4``::

      step        rank 0   rank 1   rank 2   rank 3
      RS 0        3        0        1        2        (received chunks are reduced)
      RS 1        2        3        0        1
      RS 2        1        2        3        0        → rank r holds chunk r, complete
      AG 0        0        1        2        3
      AG 1        3        0        1        2
      AG 2        2        3        0        1        → every rank holds every chunk

* :func:`segmented_ring_all_reduce` — the ring's steps as one loop, each chunk cut into up to
  ``segments`` segments of at least ``min_segment_bytes``
  (:func:`~simulator.collectives.chunks.segment_count`), each segment passed on as soon as it
  has been reduced (reduce-scatter) or has arrived (all-gather): gloo's and NCCL's pipelined
  ring.
* :func:`recursive_doubling_all_reduce` — in step ``d = 1, 2, 4, …`` swap the whole buffer with
  ``r XOR d`` and reduce: ``p = 4``: ``0↔1, 2↔3`` then ``0↔2, 1↔3``.
* :func:`rabenseifner_all_reduce` — recursive-halving reduce-scatter over ``p'`` chunks
  (:mod:`~simulator.collectives.reduce_scatter`), then recursive-doubling all-gather
  (:mod:`~simulator.collectives.all_gather`), each with the tables there.
* :func:`binary_tree_all_reduce` — reduce up NCCL's binary tree
  (:func:`~simulator.collectives.schedule.binary_tree`: a rank receives from its children in
  rank order, reduces, sends to its parent), then broadcast down it. ``p = 8``::

      0 ── 4 ─┬─ 2 ─┬─ 1       up:   1,3→2  5,7→6  then 2,6→4  then 4→0
              │     └─ 3       down: 0→4  then 4→2,6  then 2→1,3  6→5,7
              └─ 6 ─┬─ 5
                    └─ 7

* :func:`double_binary_tree_all_reduce` (Sanders, Speck & Träff 2009; NCCL ≥ 2.4) — the buffer
  is cut in two halves; half ``t`` is reduced and broadcast along tree ``t`` of
  :func:`~simulator.collectives.schedule.double_binary_tree` (message tag ``t``). Both trees run
  at once: each rank first reduces tree 0 then tree 1, then broadcasts tree 0 then tree 1, with
  every receive posted early and every send non-blocking.
* :func:`hierarchical_all_reduce` — ranks ``[i·m, (i+1)·m)`` form node ``i`` (``m =
  ranks_per_node``; the last node may be smaller): binomial reduce to each node's first rank
  (its leader), ring all-reduce among the leaders, binomial broadcast inside each node. The
  slow inter-node links carry ``2·n·(q−1)/q`` bytes per leader for ``q`` nodes.

:mod:`~simulator.collectives.fast` gives the makespans of the ring, recursive doubling (folded
for any ``p`` where no contended port carries two senders), the binary tree and the double
binary tree for tens of thousands of ranks without one SimPy process per rank, where each
is exact on the cluster (:func:`ring_all_reduce_fast`,
:func:`ring_phases_fast`, re-exported here for the step models that use them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.collectives.all_gather import doubling_all_gather_chunks, ring_all_gather_chunks
from simulator.collectives.broadcast import binomial_broadcast, binomial_broadcast_cost
from simulator.collectives.chunks import MIN_SEGMENT_BYTES, SEGMENTS, segment_count
from simulator.collectives.exchange import (
    buffer_nbytes,
    chunk_nbytes,
    posted_ahead_steps,
)
from simulator.collectives.fast import ring_all_reduce_fast as ring_all_reduce_fast
from simulator.collectives.fast import ring_phases_fast as ring_phases_fast
from simulator.collectives.reduce import binomial_reduce, binomial_reduce_cost
from simulator.collectives.reduce_scatter import (
    fold_in,
    halving_reduce_scatter_chunks,
    ring_reduce_scatter_chunks,
)
from simulator.collectives.schedule import Fold, binary_tree, children, double_binary_tree
from simulator.core.comm import SimComm, SimGen, SimWork


def _fold_out(comm: SimComm, fold: Fold, nbytes: int) -> SimGen:
    """Undo the fold: even rank ``r < 2·extra`` sends the result to its odd partner."""
    r = comm.rank
    if r < 2 * fold.extra:
        if r % 2:
            yield from comm.recv(r - 1, nbytes)
        else:
            yield from comm.send(r + 1, nbytes)


def reduce_broadcast_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Binomial reduce to rank 0, then binomial broadcast from it."""
    yield from binomial_reduce(comm, nbytes, 0, itemsize)
    yield from binomial_broadcast(comm, nbytes, 0, itemsize)


def reduce_broadcast_all_reduce_cost(p: int, nbytes: float, alpha_s: float,
                                     beta_s_per_B: float, gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`reduce_broadcast_all_reduce`, ``p = 2^k``, seconds::

        2·lg p·(α + n·β) + lg p·n·γ        (binomial reduce, then binomial broadcast)
    """
    return (binomial_reduce_cost(p, nbytes, alpha_s, beta_s_per_B, gamma_s_per_B)
            + binomial_broadcast_cost(p, nbytes, alpha_s, beta_s_per_B))


def ring_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Ring all-reduce: ring reduce-scatter, then ring all-gather, over ``p`` chunks."""
    sizes = chunk_nbytes(nbytes, comm.world_size, itemsize)
    yield from ring_reduce_scatter_chunks(comm, sizes)  # now chunk r is complete on rank r
    yield from ring_all_gather_chunks(comm, sizes, mine=comm.rank)


def ring_all_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                         gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`ring_all_reduce`, seconds::

        2(p−1)·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ

    Each rank sends and receives ``2·n·(p−1)/p`` bytes: the lower bound on all-reduce traffic.
    """
    share = nbytes * (p - 1) / p
    return 2 * (p - 1) * alpha_s + 2 * share * beta_s_per_B + share * gamma_s_per_B


def segmented_ring_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4,
                              segments: int = SEGMENTS,
                              min_segment_bytes: int = MIN_SEGMENT_BYTES) -> SimGen:
    """The ring, each chunk in segments, each passed on as soon as it is ready.

    As the real twin, :func:`~backends.collectives.all_reduce.segmented_ring_all_reduce`: in
    step ``t`` rank ``r`` receives chunk ``r − t − 2`` (its segments posted a step ahead),
    reduces each segment as it arrives in the first ``p − 1`` steps, and sends it on at once
    as step ``t + 1``'s."""
    p, r = comm.world_size, comm.rank
    sizes = chunk_nbytes(nbytes, p, itemsize)
    count = segment_count(sizes[0], segments, min_segment_bytes)  # the largest chunk
    if p == 1:
        return
    right, left, steps = (r + 1) % p, (r - 1) % p, 2 * (p - 1)

    def chunk(i: int) -> list[int]:
        return chunk_nbytes(sizes[i % p], count, itemsize)

    def receive(t: int) -> list[SimWork]:
        return [comm.irecv(left, part) for part in chunk(r - t - 2)]

    ahead = receive(0)  # before the first sends, as the real twin posts them
    sends = [comm.isend(right, part) for part in chunk(r - 1)]
    for t in range(steps):
        current = ahead
        if t + 1 < steps:
            ahead = receive(t + 1)
        for work, part in zip(current, chunk(r - t - 2), strict=True):
            yield work.wait()
            if t < p - 1:
                yield from comm.reduce(part)
            if t + 1 < steps:
                sends.append(comm.isend(right, part))
    for work in sends:
        yield work.wait()


def segmented_ring_all_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                                   gamma_s_per_B: float = 0.0, segments: int = SEGMENTS,
                                   min_segment_bytes: int = MIN_SEGMENT_BYTES) -> float:
    """Closed form of :func:`segmented_ring_all_reduce` when every message has a link of its
    own (contention ``none``), seconds::

        A + g + (p−2)·max(A + g, S·g) + (S−1)·g + (p−1)·A

    with ``S = segment_count(n/p)`` segments a chunk, ``A = α + (n/p)/S·β`` a segment's hop
    and ``g = (n/p)/S·γ`` its reduction. Reduce-scatter: segment ``j`` of step ``t`` is done
    at ``T(t, j) = max(T(t−1, j) + A, T(t, j−1)) + g`` — it must have arrived, and the rank
    must be done with the segment before (the last of step ``t − 1`` before the first of
    step ``t``). A path through that grid either follows a segment down the ring (``A + g`` a
    step) or the rank's own reductions (``g`` a segment), whichever is longer: ``A + g ≥ S·g``
    when the transfer hides the reductions. The all-gather then adds ``A`` a step. ``S = 1``
    gives :func:`ring_all_reduce_cost`.
    """
    if p < 2:
        return 0.0
    count = segment_count(int(nbytes // p), segments, min_segment_bytes)
    hop = alpha_s + nbytes / p / count * beta_s_per_B
    g = nbytes / p / count * gamma_s_per_B
    return hop + g + (p - 2) * max(hop + g, count * g) + (count - 1) * g + (p - 1) * hop


def recursive_doubling_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Recursive doubling: ``lg p`` swaps of the whole buffer with ``r XOR d``."""
    n = buffer_nbytes(nbytes, itemsize)
    fold = Fold(comm.world_size)
    yield from fold_in(comm, fold, n)
    me = fold.new_rank(comm.rank)
    if me is not None:
        partners = [fold.old_rank(me ^ (1 << k)) for k in range(fold.size.bit_length() - 1)]

        def reduce_received(step: int) -> SimGen:
            yield from comm.reduce(n)

        yield from posted_ahead_steps(comm, [(q, q) for q in partners],
                                      [(n, n)] * len(partners), reduce_received)
    yield from _fold_out(comm, fold, n)


def recursive_doubling_all_reduce_cost(p: int, nbytes: float, alpha_s: float,
                                       beta_s_per_B: float, gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`recursive_doubling_all_reduce`, ``p = 2^k``, seconds::

        lg p·(α + n·β + n·γ)
    """
    return math.log2(p) * (alpha_s + nbytes * (beta_s_per_B + gamma_s_per_B))


def rabenseifner_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling all-gather."""
    n = buffer_nbytes(nbytes, itemsize)
    fold = Fold(comm.world_size)
    yield from fold_in(comm, fold, n)
    if fold.new_rank(comm.rank) is not None:
        sizes = chunk_nbytes(n, fold.size, itemsize)
        yield from halving_reduce_scatter_chunks(comm, fold, sizes)
        yield from doubling_all_gather_chunks(comm, fold, sizes)
    yield from _fold_out(comm, fold, n)


def rabenseifner_all_reduce_cost(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                                 gamma_s_per_B: float = 0.0) -> float:
    """Closed form of :func:`rabenseifner_all_reduce`, ``p = 2^k``, seconds::

        2·lg p·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ
    """
    share = nbytes * (p - 1) / p
    return 2 * math.log2(p) * alpha_s + 2 * share * beta_s_per_B + share * gamma_s_per_B


def trees_all_reduce(comm: SimComm, trees: list[tuple[int, Sequence[int | None]]]) -> SimGen:
    """Reduce ``nbytes`` up each tree (given by its parents) to the root, then broadcast them
    back down; all trees at once, tree ``t`` on message tag ``t``."""
    r = comm.rank
    kids = [children(parents, r) for _, parents in trees]
    recvs = [[comm.irecv(child, nbytes, tag=t) for child in kids[t]]
             for t, (nbytes, _) in enumerate(trees)]
    ups: list[SimWork] = []
    for t, (nbytes, parents) in enumerate(trees):  # reduce up
        for work in recvs[t]:
            yield work.wait()
            yield from comm.reduce(nbytes)
        if (parent := parents[r]) is not None:
            ups.append(comm.isend(parent, nbytes, tag=t))
    for work in ups:
        yield work.wait()
    downs = [None if (parent := parents[r]) is None else comm.irecv(parent, nbytes, tag=t)
             for t, (nbytes, parents) in enumerate(trees)]
    sends: list[SimWork] = []
    for t, (nbytes, _) in enumerate(trees):  # broadcast down
        if (down := downs[t]) is not None:
            yield down.wait()
        sends += [comm.isend(child, nbytes, tag=t) for child in kids[t]]
    for work in sends:
        yield work.wait()


def binary_tree_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Reduce up one binary tree to rank 0, then broadcast back down it."""
    n = buffer_nbytes(nbytes, itemsize)
    yield from trees_all_reduce(comm, [(n, binary_tree(comm.world_size))])


def double_binary_tree_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """NCCL's double binary tree: each of two complementary trees all-reduces half the data."""
    first_half, second_half = chunk_nbytes(nbytes, 2, itemsize)
    first, second = double_binary_tree(comm.world_size)
    yield from trees_all_reduce(comm, [(first_half, first), (second_half, second)])


def hierarchical_all_reduce(comm: SimComm, nbytes: int, ranks_per_node: int = 8,
                            itemsize: int = 4) -> SimGen:
    """Reduce inside each node, all-reduce among node leaders, broadcast inside each node."""
    if ranks_per_node < 1:
        raise ValueError(f"ranks_per_node must be at least 1, got {ranks_per_node}")
    p, first = comm.world_size, comm.rank - comm.rank % ranks_per_node
    node = comm.new_group(list(range(first, min(first + ranks_per_node, p))))
    leaders = comm.new_group(list(range(0, p, ranks_per_node)))
    assert node is not None, "every rank is in its own node"
    yield from binomial_reduce(node, nbytes, 0, itemsize)
    if leaders is not None:
        yield from ring_all_reduce(leaders, nbytes, itemsize)
    yield from binomial_broadcast(node, nbytes, 0, itemsize)
