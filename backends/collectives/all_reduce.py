"""All-reduce on real processes, eight ways, from scratch on point-to-point messages (§2.4–2.5).

Twin of :mod:`simulator.collectives.all_reduce` (same names, same steps). Every rank holds
``n`` bytes in ``tensor``; afterwards every rank holds their reduction, as with
``dist.all_reduce(tensor, op)``. Costs (Thakur, Rabenseifner & Gropp 2005, §4.5; γ = reduction
time per byte; ``p = 2^k`` where a power of two is needed — other ``p`` fold first, MPICH's way,
:class:`~simulator.collectives.schedule.Fold`: odd rank ``r < 2·extra`` sends its buffer to
``r − 1``, which reduces; at the end ``r − 1`` sends the result back to ``r``):

* :func:`reduce_broadcast_all_reduce` — the parameter-server shape: binomial reduce to rank 0,
  then binomial broadcast from it: ``2·⌈lg p⌉·(α + n·β) + ⌈lg p⌉·n·γ``.
* :func:`ring_all_reduce` (Patarasuk & Yuan 2009; book §2.5) — ring reduce-scatter
  (step ``s``: send chunk ``r−s−1`` right, receive and reduce chunk ``r−s−2`` from the left),
  then ring all-gather (step ``s``: send chunk ``r−s``, receive chunk ``r−s−1``); chunks by
  :func:`~simulator.collectives.chunks.chunk_bounds`:
  ``2(p−1)·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ``, the bandwidth lower bound.
* :func:`segmented_ring_all_reduce` — the same ring with each chunk cut into ``S`` segments
  (up to ``segments``, each at least ``min_segment_bytes``:
  :func:`~simulator.collectives.chunks.segment_count`) that travel as separate messages, and
  every segment is passed on as soon as it is ready: reduced (reduce-scatter) or arrived
  (all-gather), without waiting for the rest of its chunk — the pipelined ring of gloo and
  NCCL. With ``A = α + (n/p)/S·β`` a segment's hop and ``g = (n/p)/S·γ`` its reduction:
  ``A + g + (p−2)·max(A + g, S·g) + (S−1)·g + (p−1)·A`` when every message has a link of its
  own (``S = 1``: the ring's cost).
* :func:`recursive_doubling_all_reduce` — in step ``d = 1, 2, 4, …`` swap the whole buffer with
  ``r XOR d`` and reduce: ``lg p·(α + n·β + n·γ)``.
* :func:`rabenseifner_all_reduce` — recursive-halving reduce-scatter over ``p'`` chunks
  (:mod:`~backends.collectives.reduce_scatter`), then recursive-doubling all-gather
  (:mod:`~backends.collectives.all_gather`): ``2·lg p·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ``.
* :func:`binary_tree_all_reduce` — reduce up the binary tree of
  :func:`~simulator.collectives.schedule.binary_tree` (a rank receives from its children in
  rank order, reduces, sends to its parent), then broadcast down it (receive from the parent,
  send to the children).
* :func:`double_binary_tree_all_reduce` (Sanders, Speck & Träff 2009; NCCL ≥ 2.4) — the buffer
  is cut in two halves (``chunk_bounds(count, 2)``); half ``t`` is reduced and broadcast along
  tree ``t`` of :func:`~simulator.collectives.schedule.double_binary_tree` (message tag ``t``).
  Both trees run at once: each rank first reduces tree 0 then tree 1, then broadcasts tree 0
  then tree 1, with every receive posted early and every send non-blocking.
* :func:`hierarchical_all_reduce` — ranks ``[i·m, (i+1)·m)`` form node ``i`` (``m =
  ranks_per_node``; the last node may be smaller): binomial reduce to each node's first rank
  (its leader), ring all-reduce among the leaders, binomial broadcast inside each node. The
  slow inter-node links carry ``2·n·(q−1)/q`` bytes per leader for ``q`` nodes.

``op`` is SUM, MAX, MIN or AVG (SUM, then divided by ``p``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from backends.collectives.all_gather import doubling_all_gather_chunks, ring_all_gather_chunks
from backends.collectives.broadcast import binomial_broadcast
from backends.collectives.comm import (
    Comm,
    Group,
    Pending,
    ReduceOp,
    check_flat,
    check_op,
    finish,
    scratch,
    scratch_rows,
    segments_of,
)
from backends.collectives.reduce import binomial_reduce
from backends.collectives.reduce_scatter import (
    fold_in,
    halving_reduce_scatter_chunks,
    ring_reduce_scatter_chunks,
)
from backends.trace import Tracer
from simulator.collectives.chunks import (
    MIN_SEGMENT_BYTES,
    SEGMENTS,
    chunk_bounds,
    segment_count,
)
from simulator.collectives.schedule import Fold, binary_tree, children, double_binary_tree

SUM = dist.ReduceOp.SUM


def _start(tensor: torch.Tensor, op: ReduceOp, group: Group, tracer: Tracer | None) -> Comm:
    check_flat(tensor)
    check_op(op, tensor)
    return Comm(group, tracer)


def _fold_out(comm: Comm, fold: Fold, tensor: torch.Tensor) -> None:
    """Undo the fold: even rank ``r < 2·extra`` sends the result to its odd partner."""
    r = comm.rank
    if r < 2 * fold.extra:
        if r % 2:
            comm.recv(r - 1, tensor)
        else:
            comm.send(r + 1, tensor)


def reduce_broadcast_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM, group: Group = None,
                                tracer: Tracer | None = None) -> None:
    """Binomial reduce to the first rank, then binomial broadcast from it."""
    root = _start(tensor, op, group, tracer).ranks[0]
    binomial_reduce(tensor, root, op, group, tracer)  # AVG: the root divides, then shares
    binomial_broadcast(tensor, root, group, tracer)


def ring_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM, group: Group = None,
                    tracer: Tracer | None = None) -> None:
    """Ring all-reduce: ring reduce-scatter, then ring all-gather, over ``p`` chunks."""
    comm = _start(tensor, op, group, tracer)
    bounds = chunk_bounds(tensor.numel(), comm.world_size)
    ring_reduce_scatter_chunks(comm, tensor, bounds, op)  # now chunk r is complete on rank r
    ring_all_gather_chunks(comm, tensor, bounds, mine=comm.rank)
    finish(tensor, op, comm.world_size)


def segmented_ring_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM, group: Group = None,
                              tracer: Tracer | None = None, segments: int = SEGMENTS,
                              min_segment_bytes: int = MIN_SEGMENT_BYTES) -> None:
    """The ring, each chunk in segments, each segment passed on as soon as it is ready.

    The ring's ``2(p−1)`` steps as one loop: in step ``t`` rank ``r`` receives chunk
    ``r − t − 2`` from the left — in the first ``p − 1`` steps into a scratch row, then reduced
    into its own copy; in the last ``p − 1`` directly in place — and step ``t + 1`` sends that
    very chunk to the right. So each segment goes right the moment it has been reduced (or
    has arrived), while the chunk's next segments are still coming in; the receives of step
    ``t + 1`` are posted before step ``t`` is waited for. Gloo keeps one TCP connection per
    pair; with two ranks every step is a swap on it, and one large message each way moves
    slower than the same bytes as a few messages in flight (``benchmarks/collectives_vs_gloo``).
    An all-gather receive may overwrite a chunk whose partial sum this rank sent ``p − 1``
    steps earlier: the new bytes cannot arrive before that send has left, since they are
    made from it (it went right, and came back round the ring reduced).
    """
    comm = _start(tensor, op, group, tracer)
    p = comm.world_size
    bounds = chunk_bounds(tensor.numel(), p)
    lo, hi = bounds[0]  # the largest chunk: every rank cuts every chunk into as many
    count = segment_count((hi - lo) * tensor.element_size(), segments, min_segment_bytes)
    if p > 1:
        _pipelined_ring(comm, tensor, bounds, op, count)
    finish(tensor, op, p)


def _pipelined_ring(comm: Comm, buf: torch.Tensor, bounds: list[tuple[int, int]],
                    op: ReduceOp, count: int) -> None:
    """The loop of :func:`segmented_ring_all_reduce` (``p ≥ 2``), ``count`` segments a chunk."""
    p, r = comm.world_size, comm.rank
    right, left, steps = (r + 1) % p, (r - 1) % p, 2 * (p - 1)
    size = max(hi - lo for lo, hi in bounds)
    rows = scratch(buf, 2 * size)

    def chunk(i: int) -> list[torch.Tensor]:
        lo, hi = bounds[i % p]
        return segments_of(buf[lo:hi], count)

    def receive(t: int) -> tuple[list[Pending], list[torch.Tensor]]:  # chunk r - t - 2
        lo, hi = bounds[(r - t - 2) % p]
        # reduce-scatter: into row t % 2, then reduced into the chunk; all-gather: in place
        into = segments_of(rows[t % 2 * size:][:hi - lo] if t < p - 1 else buf[lo:hi], count)
        return [comm.irecv(left, part) for part in into], into

    ahead = receive(0)  # before the first sends, so that the left neighbour's find it posted
    sends = [comm.isend(right, part) for part in chunk(r - 1)]
    for t in range(steps):
        current, into = ahead
        if t + 1 < steps:
            ahead = receive(t + 1)
        for work, part, target in zip(current, into, chunk(r - t - 2), strict=True):
            work.wait()
            if t < p - 1:
                comm.reduce(target, part, op)
            if t + 1 < steps:  # step t + 1 sends the chunk step t received
                sends.append(comm.isend(right, target))
    for work in sends:
        work.wait()


def recursive_doubling_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM,
                                  group: Group = None, tracer: Tracer | None = None) -> None:
    """Recursive doubling: ``lg p`` swaps of the whole buffer with ``r XOR d``.

    Each step receives into one of two slots of a scratch buffer, and the receive of step
    ``d`` from ``r XOR 2d`` is posted before step ``d`` is waited for — as the rings post
    their next receive early — so the next partner's send finds it ready instead of waiting
    for this rank to be scheduled again and post it (with 4 ranks on 2 cores, a wait for a
    time slice: measured 4.5 → 3.6 ms at 64 KiB, 6.2 → 4.4 ms at 1 MiB). Which message goes
    where in which step is unchanged.
    """
    comm = _start(tensor, op, group, tracer)
    fold = Fold(comm.world_size)
    fold_in(comm, fold, tensor, op)
    me = fold.new_rank(comm.rank)
    if me is not None:
        partners = [fold.old_rank(me ^ (1 << k)) for k in range(fold.size.bit_length() - 1)]
        n = tensor.numel()
        count = min(2, len(partners))
        slots = scratch_rows(tensor, count, n)
        ahead = comm.irecv(partners[0], slots[0]) if partners else None
        for step, partner in enumerate(partners):
            current = ahead
            assert current is not None
            sent = comm.isend(partner, tensor)
            ahead = (comm.irecv(partners[step + 1], slots[(step + 1) % 2])
                     if step + 1 < len(partners) else None)
            current.wait()
            sent.wait()
            comm.reduce(tensor, slots[step % 2], op)
    _fold_out(comm, fold, tensor)
    finish(tensor, op, comm.world_size)


def rabenseifner_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM, group: Group = None,
                            tracer: Tracer | None = None) -> None:
    """Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling all-gather."""
    comm = _start(tensor, op, group, tracer)
    fold = Fold(comm.world_size)
    fold_in(comm, fold, tensor, op)
    if fold.new_rank(comm.rank) is not None:
        bounds = chunk_bounds(tensor.numel(), fold.size)
        halving_reduce_scatter_chunks(comm, fold, tensor, bounds, op)
        doubling_all_gather_chunks(comm, fold, tensor, bounds)
    _fold_out(comm, fold, tensor)
    finish(tensor, op, comm.world_size)


def trees_all_reduce(comm: Comm, trees: list[tuple[torch.Tensor, Sequence[int | None]]],
                     op: ReduceOp) -> None:
    """Reduce each ``part`` up its tree (given by parents) to the root, then broadcast it back
    down; all trees at once, tree ``t`` on message tag ``t``."""
    r = comm.rank
    kids = [children(parents, r) for _, parents in trees]
    incoming = [[torch.empty_like(part) for _ in kids[t]] for t, (part, _) in enumerate(trees)]
    recvs = [[comm.irecv(child, buf, tag=t) for child, buf in zip(kids[t], incoming[t],
                                                                  strict=True)]
             for t in range(len(trees))]
    ups = []
    for t, (part, parents) in enumerate(trees):  # reduce up
        for work, buf in zip(recvs[t], incoming[t], strict=True):
            work.wait()
            comm.reduce(part, buf, op)
        if (parent := parents[r]) is not None:
            ups.append(comm.isend(parent, part, tag=t))
    for work in ups:
        work.wait()
    downs = [None if (parent := parents[r]) is None else comm.irecv(parent, part, tag=t)
             for t, (part, parents) in enumerate(trees)]
    sends = []
    for t, (part, _) in enumerate(trees):  # broadcast down
        if (down := downs[t]) is not None:
            down.wait()
        sends += [comm.isend(child, part, tag=t) for child in kids[t]]
    for work in sends:
        work.wait()


def binary_tree_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM, group: Group = None,
                           tracer: Tracer | None = None) -> None:
    """Reduce up one binary tree to rank 0, then broadcast back down it."""
    comm = _start(tensor, op, group, tracer)
    trees_all_reduce(comm, [(tensor, binary_tree(comm.world_size))], op)
    finish(tensor, op, comm.world_size)


def double_binary_tree_all_reduce(tensor: torch.Tensor, op: ReduceOp = SUM,
                                  group: Group = None, tracer: Tracer | None = None) -> None:
    """NCCL's double binary tree: each of two complementary trees all-reduces half the data."""
    comm = _start(tensor, op, group, tracer)
    (a, b), (c, d) = chunk_bounds(tensor.numel(), 2)
    first, second = double_binary_tree(comm.world_size)
    trees_all_reduce(comm, [(tensor[a:b], first), (tensor[c:d], second)], op)
    finish(tensor, op, comm.world_size)


def hierarchical_all_reduce(tensor: torch.Tensor, ranks_per_node: int, op: ReduceOp = SUM,
                            group: Group = None, tracer: Tracer | None = None) -> None:
    """Reduce inside each node, all-reduce among node leaders, broadcast inside each node."""
    comm = _start(tensor, op, group, tracer)
    if ranks_per_node < 1:
        raise ValueError(f"ranks_per_node must be at least 1, got {ranks_per_node}")
    first = comm.rank - comm.rank % ranks_per_node
    node = comm.ranks[first:first + ranks_per_node]  # global ranks: sub-teams, no new_group
    leaders = comm.ranks[::ranks_per_node]
    inner = SUM if op == dist.ReduceOp.AVG else op
    binomial_reduce(tensor, node[0], inner, node, tracer)
    if comm.rank == first:
        ring_all_reduce(tensor, inner, leaders, tracer)
    binomial_broadcast(tensor, node[0], node, tracer)
    finish(tensor, op, comm.world_size)
