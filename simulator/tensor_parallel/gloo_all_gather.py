"""Gloo's all-gather as this host waits for it: every received half-chunk a blocking wait."""

from __future__ import annotations

from simulator.core.comm import SimComm, SimGen


def waited_gloo_all_gather(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Gloo's ring all-gather of ``nbytes`` in all (``nbytes / p`` from each rank), every
    received message a blocking wait of its own — the all-gather twin of
    :func:`simulator.ddp.waited_gloo_all_reduce`.

    Gloo (``gloo/allgather.cc``) cuts each rank's chunk in two halves and runs ``2·(p − 1)``
    iterations: in iteration ``i`` rank ``r`` sends half ``i mod 2`` of chunk ``r − ⌊i/2⌋`` to
    ``r + 1`` and receives the same half of chunk ``r − ⌊i/2⌋ − 1`` from ``r − 1``. So a
    two-rank all-gather is two messages each way, not one: on a host where the latency of a
    tiny message is a wake-up (``lab.tensor_parallel.ring_steps``), two waits.
    """
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    chunk = -(-nbytes // p // itemsize) * itemsize
    halves = (chunk // itemsize // 2 * itemsize, chunk - chunk // itemsize // 2 * itemsize)
    left, right = (r - 1) % p, (r + 1) % p
    sends = []
    for i in range(2 * (p - 1)):
        size = halves[i % 2]
        recv = comm.irecv(left, size) if size else None
        if size:
            sends.append(comm.isend(right, size))
        if recv is not None:
            yield recv.wait()
    for send in sends:
        yield send.wait()
