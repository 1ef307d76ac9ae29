"""Compute and communication on shared cores: how much each slows the other, measured.

:func:`overlap_interference` is a primitive run on every rank at once — matmuls on the main
thread while gloo's threads exchange messages with a partner rank — and :func:`interference`
turns it into a :class:`simulator.ddp.Interference` for the prediction
(:class:`simulator.ddp.CoreShare`).

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from simulator.ddp import Interference

COMM_SEGMENT_BYTES = 2**20
"""Message size of the CPU-share measurement: gloo's largest ring segment."""


def _post_exchanges(send: Any, recv: Any, count: int) -> list[Any]:
    """Post ``count`` exchanges with partner ``r xor 1`` at once (asynchronous, like DDP's
    bucket all-reduces); returns the works, completing in order."""
    import torch.distributed as dist

    peer = dist.get_rank() ^ 1
    if peer >= dist.get_world_size():
        return []
    works = []
    for _ in range(count):
        works += [dist.isend(send, peer), dist.irecv(recv, peer)]
    return works


def overlap_interference(count: int = 150, nbytes: int = COMM_SEGMENT_BYTES,
                         repeats: int = 3) -> tuple[float, float]:
    """Rank function: (compute speed, communication speed) while both run, each relative to
    running alone — every rank doing the same at once, as in a DDP step.

    Communication: ``count`` exchanges of ``nbytes`` with partner ``r xor 1``, posted at once
    as asynchronous operations (gloo's threads carry them, as they carry DDP's buckets).
    Compute: ``32 × 1024`` by ``1024 × 1024`` matmuls on the main thread, one layer's work.
    Overlapped: matmuls run until the exchanges complete. Medians over ``repeats``.
    """
    import torch
    import torch.distributed as dist

    x, w = torch.randn(32, 1024), torch.randn(1024, 1024)
    send, recv = torch.zeros(nbytes, dtype=torch.uint8), torch.empty(nbytes, dtype=torch.uint8)
    alone_comm, both_comm, mm_rate, both_mm = [], [], [], []
    for work in _post_exchanges(send, recv, 5):
        work.wait()
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for work in _post_exchanges(send, recv, count):
            work.wait()
        alone_comm.append(time.perf_counter() - start)
        dist.barrier()
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < alone_comm[-1]:
            torch.mm(x, w)
            done += 1
        mm_rate.append(done / (time.perf_counter() - start))
        dist.barrier()
        start, done = time.perf_counter(), 0
        works = _post_exchanges(send, recv, count)
        finished = threading.Event()  # a gloo send/recv work reports completion only to wait()

        def wait_all(works: list[Any] = works, finished: threading.Event = finished) -> None:
            for work in works:
                work.wait()
            finished.set()

        waiter = threading.Thread(target=wait_all)
        waiter.start()
        while not finished.is_set():
            torch.mm(x, w)
            done += 1
        waiter.join()
        both_comm.append(time.perf_counter() - start)
        both_mm.append(done / both_comm[-1])
    med = statistics.median
    if dist.get_rank() ^ 1 >= dist.get_world_size() or min(alone_comm + both_comm) <= 0:
        return 1.0, 1.0  # no partner (odd world): it only computed, as it would alone
    return med(both_mm) / med(mm_rate), med(alone_comm) / med(both_comm)


def interference(world: int) -> Interference:
    """:func:`overlap_interference` on ``world`` ranks at once, medians over the ranks."""
    from backends.launch import spawn

    rates = spawn(overlap_interference, world)
    return Interference(statistics.median(r[0] for r in rates),
                        statistics.median(r[1] for r in rates))
