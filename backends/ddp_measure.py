"""DDP measured: the rank programs of the DDP lab (book chapters 5–6), run under
:func:`backends.launch.spawn`, one process per rank.

* :func:`overlap_interference` — compute and communication on shared cores: how fast the
  matmuls of a main thread and the exchanges of gloo's threads go while both run, each relative
  to running alone (a primitive, every rank at once, as in a DDP step);
* :func:`measure_steps` — :class:`backends.ddp.DistributedDataParallel` and
  ``torch.nn.parallel.DistributedDataParallel`` at each bucket cap, repeats interleaved
  (:func:`backends.measure.measure_many`), one training step per call;
* :func:`measured_timeline` — one traced step of ours (forward, backward, optimizer spans and,
  per bucket, ``ready`` and ``allreduce`` spans);
* :func:`train_uneven` — uneven inputs, with and without :class:`backends.ddp_join.Join`.

The model is the caller's: a ``build(widths)`` that returns the same seeded ``nn.Module`` on
every rank (the lab passes its MLP). Units: seconds, bytes; bucket caps in MiB.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

COMM_SEGMENT_BYTES = 2**20
"""Message size of the CPU-share measurement: gloo's largest ring segment."""

Build = Callable[[Sequence[int]], Any]
"""A model builder: the layer widths → a seeded ``nn.Module``, the same on every rank."""


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

    from backends.device import device

    on = device()
    x, w = torch.randn(32, 1024, device=on), torch.randn(1024, 1024, device=on)
    send = torch.zeros(nbytes, dtype=torch.uint8, device=on)
    recv = torch.empty(nbytes, dtype=torch.uint8, device=on)
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


def _step(model: Any, opt: Any, x: Any, y: Any) -> Callable[[], None]:
    import torch

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
        opt.step()

    return step


def _models(build: Build, widths: Sequence[int], caps: Sequence[float | None], batch: int,
            which: Sequence[str]) -> list[tuple[str, float | None, Callable[[], None]]]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as TorchDDP

    from backends.ddp import DistributedDataParallel
    from backends.device import device, on_device

    gen = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(batch, widths[0], generator=gen).to(device())
    y = torch.randn(batch, widths[-1], generator=gen).to(device())
    steps = []
    for cap in caps:
        for name in which:
            net = on_device(build(widths))
            ddp = (TorchDDP(net, bucket_cap_mb=cap) if name == "pytorch" else
                   DistributedDataParallel(net, bucket_cap_mb=cap, overlap=name == "ours"))
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            steps.append((name, cap, _step(ddp, opt, x, y)))
    return steps


def measure_steps(build: Build, widths: Sequence[int], batch: int,
                  caps: Sequence[float | None], repeats: int = 10,
                  which: Sequence[str] = ("ours", "pytorch", "ours-serial")
                  ) -> list[dict[str, Any]]:
    """Rank function: step time (s) of each DDP at each bucket cap (MiB), repeats interleaved
    (``ours-serial``: ours with ``overlap=False``), training ``build(widths)`` on a ``batch``
    of random rows."""
    from backends.measure import measure_many

    steps = _models(build, widths, caps, batch, which)
    timings = measure_many([fn for _, _, fn in steps], repeats=repeats, warmup=3, inner=1)
    return [{"ddp": name, "bucket_cap_mb": cap, **t.as_dict()}
            for (name, cap, _), t in zip(steps, timings, strict=True)]


def measured_timeline(build: Build, widths: Sequence[int], batch: int,
                      bucket_cap_mb: float | None, steps: int = 3) -> list[dict[str, Any]]:
    """Rank function: the spans (s) of the last of ``steps`` traced steps of our DDP training
    ``build(widths)``, every rank's, gathered (:meth:`backends.trace.Tracer.gather`)."""
    import torch
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.device import to_device
    from backends.trace import Tracer

    tracer = Tracer()
    model = DistributedDataParallel(build(widths), bucket_cap_mb=bucket_cap_mb, tracer=tracer)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(dist.get_rank())
    x, y = to_device((torch.randn(batch, widths[0], generator=gen),
                      torch.randn(batch, widths[-1])))
    for _ in range(steps):
        dist.barrier()
        tracer.trace.spans.clear()
        opt.zero_grad()
        with tracer.span("compute", "forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with tracer.span("compute", "backward + wait"):
            loss.backward()  # type: ignore[no-untyped-call]
        with tracer.span("compute", "optimizer"):
            opt.step()
    return tracer.gather().to_records()


def train_uneven(build: Build, batches_per_rank: Sequence[int],
                 use_join: bool) -> dict[str, Any]:
    """Rank function: train our DDP of ``build((32, 64, 8))`` on ``batches_per_rank[rank]``
    batches, with or without :class:`backends.ddp_join.Join`; returns the steps taken, the time
    (s) and the parameters' checksum (equal on every rank when training ended well)."""
    import torch
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.ddp_join import Join
    from backends.device import device

    model = DistributedDataParallel(build((32, 64, 8)), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = dist.get_rank()
    start, steps = time.perf_counter(), 0

    def loop() -> None:
        nonlocal steps
        for _ in range(batches_per_rank[rank]):
            opt.zero_grad()
            model(torch.randn(16, 32, device=device())).square().mean().backward()
            opt.step()
            steps += 1

    if use_join:
        with Join([model]):
            loop()
    else:
        loop()
        dist.barrier()  # the others are still in a backward's all-reduce: this never matches
    checksum = float(sum(p.double().sum() for p in model.parameters()))
    return {"rank": rank, "steps": steps, "seconds": time.perf_counter() - start,
            "checksum": checksum}
