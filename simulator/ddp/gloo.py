"""Gloo's all-reduce for a dense CPU tensor (``gloo/allreduce.cc``, the ring algorithm).

The buffer is cut into ``k·p`` segments of at most 1 MiB (``k ≥ 2`` per rank), a ring
reduce-scatter and a ring all-gather each send ``k(p−1)`` segments to the left neighbour, two
in flight at a time (one per direction at ``p = 2``: see :func:`gloo_ring_all_reduce`),
reducing one segment while the next is on the wire. Bytes per rank ``2·n·(p−1)/p``, messages
``2·k(p−1)``.

Units: seconds, bytes.
"""

from __future__ import annotations

from simulator.core.comm import SimComm, SimGen, SimWork, run_spmd
from simulator.core.hardware import Cluster
from simulator.ddp.buckets import MiB

GLOO_MAX_SEGMENT_BYTES = 1 * MiB
"""``gloo::AllreduceOptions::kMaxSegmentSize``: the largest message of gloo's ring."""


def gloo_segments(nbytes: int, p: int, itemsize: int = 4,
                  max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> list[int]:
    """Byte length of each of the ``k·p`` segments gloo's ring cuts ``nbytes`` into.

    ``segment = min(⌈n / 2p⌉, max)`` rounded up to whole elements; ``k·p`` segments with
    ``k ≥ 2``, so the last ones may be short or empty.
    """
    seg = min(-(-nbytes // (2 * p)), max_segment_bytes // itemsize * itemsize)
    seg = max(itemsize, -(-seg // itemsize) * itemsize)
    count = -(-max(-(-nbytes // seg), 2 * p) // p) * p
    return [max(0, min(seg, nbytes - i * seg)) for i in range(count)]


def gloo_ring_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4, tag: int = 0,
                         max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> SimGen:
    """Gloo's segmented ring all-reduce (``gloo/allreduce.cc``), two segments in flight.

    Reduce-scatter: in iteration ``i`` rank ``r`` sends segment ``(r+1)·k + i`` to ``r−1`` and
    receives segment ``(r+2)·k + i`` from ``r+1``; it waits for iteration ``i−2``'s pair and
    reduces what arrived. All-gather: the same with ``r·k + i`` and ``(r+1)·k + i``, no
    reduction. Empty segments are not sent.

    A segment moves only once its receiver is ready for it: gloo's TCP transport sends an
    unbound buffer after the peer's *receive-ready* notice has arrived
    (``gloo/transport/tcp/pair.cc``, ``Pair::send`` waits for ``shiftRemotePendingRecv``).
    The notice for segment ``i`` is posted with the receive, and travels in the receiver's
    TCP stream to the sender. With ``p ≥ 3`` that direction carries no segments (a rank
    sends segments to its left neighbour, notices to its right one): the notice is a tiny
    message, there before the segment ahead has left, and two segments stay in flight. With
    ``p = 2`` the left and the right neighbour are the same peer, so the notice queues in
    the stream behind the peer's own segment ``i−1`` and reaches this rank only after it:
    segment ``i`` leaves once segment ``i−1`` from the peer has arrived — one segment in
    flight per direction, each paying its latency on its own.
    """
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    sizes = gloo_segments(nbytes, p, itemsize, max_segment_bytes)
    n, k = len(sizes), len(sizes) // p
    left, right = (r - 1) % p, (r + 1) % p

    def after(ahead: list[SimWork], out: int) -> SimGen:  # p = 2: once the notice is in
        for work in ahead:
            yield work.wait()
        yield comm.isend(left, out, tag).wait()

    for first_send, first_recv, reduce in ((r + 1, r + 2, True), (r, r + 1, False)):
        pending: list[tuple[SimWork | None, SimWork | None, int]] = []
        for i in range(k * (p - 1) + 2):
            if i >= 2:
                recv, send, got = pending[i - 2]
                if recv is not None:
                    yield recv.wait()
                    if reduce:
                        yield from comm.reduce(got)
                if send is not None:
                    yield send.wait()
            if i < k * (p - 1):
                out, into = sizes[(first_send * k + i) % n], sizes[(first_recv * k + i) % n]
                recv_work = comm.irecv(right, into, tag) if into else None
                ahead = [w for w in pending[i - 1][:2] if w is not None] if (
                    p == 2 and i >= 1) else []
                if not out:
                    send_work = None
                elif not ahead:
                    send_work = comm.isend(left, out, tag)
                else:
                    send_work = SimWork(comm.env.process(after(ahead, out)))
                pending.append((recv_work, send_work, into))


def waited_gloo_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Gloo's segmented ring all-reduce (the ``2·k·p`` segments of
    :func:`gloo_segments`, reduce-scatter then all-gather) with every received
    segment a blocking wait of its own.

    :func:`gloo_ring_all_reduce` keeps two segments in flight, so on an idle link half of
    the latencies overlap. On this host the latency of a tiny message is a *wake-up*
    (measured by ``lab.tensor_parallel.ring_steps``): gloo's worker thread sleeps on each
    segment and is woken when it arrives, and those wake-ups do not overlap. The all-reduce probe of
    ``benchmarks/tensor_parallel_accuracy.py`` says so: an 8 KB all-reduce (4 segments per
    rank at ``p = 2``, 12 at ``p = 4``) costs about 4 and 12 waits, not 2 and 6."""
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    sizes = gloo_segments(nbytes, p, itemsize)
    n, k = len(sizes), len(sizes) // p
    left, right = (r - 1) % p, (r + 1) % p
    for first_send, first_recv, reduce in ((r + 1, r + 2, True), (r, r + 1, False)):
        sends = []
        for i in range(k * (p - 1)):
            out, into = sizes[(first_send * k + i) % n], sizes[(first_recv * k + i) % n]
            recv = comm.irecv(right, into) if into else None
            if out:
                sends.append(comm.isend(left, out))
            if recv is not None:
                yield recv.wait()
                if reduce:
                    yield from comm.reduce(into)
        for send in sends:
            yield send.wait()

def all_reduce_time(cluster: Cluster, nbytes: int, itemsize: int = 4) -> float:
    """Makespan of :func:`gloo_ring_all_reduce` of ``nbytes`` alone on ``cluster``, s."""
    return run_spmd(cluster, gloo_ring_all_reduce, nbytes, itemsize, trace=False).makespan_s
