"""The real engine measured, and the primitives a Horovod step is predicted from (chapter 7).

Rank programs, run under :func:`backends.launch.spawn` on this machine's processes:

* :func:`measure_settings` — training steps of a model under the engine at each (fusion
  threshold, cycle time), with the engine's own counters (:func:`backends.horovod.stats`);
* :func:`measured_timeline` — one step's spans, the main thread's and the background
  thread's, named as the simulated engine names its spans;
* the primitives, none of them a Horovod measurement: :func:`whole_model_rank` (forward,
  backward and SGD step with no communication), :func:`small_messages` (8-byte message
  latencies, idle and beside computing main threads), :func:`ring_step_rank` (the mean wait of
  a tiny ring all-reduce) and :func:`idle_cycles_rank` (the idle engine's CPU per cycle).

The model is the caller's: a ``build(widths)`` that returns the same seeded ``nn.Module`` on
every rank (the lab passes its MLP). Units: seconds, bytes; fusion thresholds in MiB, cycle
times in ms.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from simulator.ddp import MiB

Build = Callable[[Sequence[int]], Any]
"""A model builder: the layer widths → a seeded ``nn.Module``, the same on every rank."""


def _data(widths: Sequence[int], batch: int) -> tuple[Any, Any]:
    import torch
    import torch.distributed as dist

    from backends.device import device

    gen = torch.Generator().manual_seed(dist.get_rank())
    return (torch.randn(batch, widths[0], generator=gen).to(device()),
            torch.randn(batch, widths[-1], generator=gen).to(device()))


def _horovod_training(build: Build, widths: Sequence[int], fusion_threshold_mb: float,
                      cycle_time_ms: float, timeline: bool = False) -> tuple[Any, Any]:
    """``hvd.init`` with these settings, the model and its ``DistributedOptimizer`` (SGD)."""
    import torch

    import backends.horovod as hvd
    from backends.device import on_device

    hvd.init(cycle_time_ms=cycle_time_ms, fusion_threshold_bytes=int(fusion_threshold_mb * MiB),
             timeline=timeline)
    model = on_device(build(widths))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    return model, opt


def measure_settings(build: Build, widths: Sequence[int], batch: int,
                     points: Sequence[tuple[float, float]], repeats: int = 10,
                     rounds: int = 2, warmup: int = 3) -> list[dict[str, Any]]:
    """Rank function: the real engine's step time training ``build(widths)`` at each
    ``(fusion threshold MiB, cycle time ms)``. A setting needs its own engine (``init`` …
    ``shutdown``), so repeats are interleaved by rounds: each round visits every point and takes
    ``repeats / rounds`` samples (``warmup`` steps first: the response cache fills in the
    first). A sample is one training step, barrier-aligned, the slowest rank's time. Also each
    point's :func:`backends.horovod.stats` per step (cycles, fused all-reduces)."""
    import torch

    import backends.horovod as hvd
    from backends.measure import Timing, measure

    x, y = _data(widths, batch)
    samples: dict[int, list[float]] = {i: [] for i in range(len(points))}
    counters: dict[int, dict[str, float]] = {}
    per_round = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for i, (threshold_mb, cycle_ms) in enumerate(points):
            model, opt = _horovod_training(build, widths, threshold_mb, cycle_ms)
            try:
                def step(model: Any = model, opt: Any = opt) -> None:
                    opt.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()  # type: ignore[no-untyped-call]
                    opt.step()

                for _ in range(warmup):
                    step()
                hvd.reset_stats()
                timing = measure(step, repeats=per_round, warmup=0, inner=1)
                stats = hvd.stats()
                samples[i] += list(timing.samples_s)
                steps = per_round + 1  # measure() runs one more, unrecorded, step first
                counters[i] = {"cycles_per_step": stats["cycles"] / steps,
                               "allreduces_per_step": stats["allreduces"] / steps,
                               "coordinator_rounds": stats["coordinator_rounds"]}
            finally:
                hvd.shutdown()
    return [{"fusion_threshold_mb": t, "cycle_time_ms": c,
             **Timing.from_samples(samples[i]).as_dict(), **counters[i]}
            for i, (t, c) in enumerate(points)]


def measured_timeline(build: Build, widths: Sequence[int], batch: int,
                      fusion_threshold_mb: float, cycle_time_ms: float,
                      steps: int = 4) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps, every rank: the main
    thread's (``compute`` forward, ``compute`` backward, ``wait`` synchronize, ``compute``
    optimizer, instants ``ENQUEUE``) and the background thread's (``WAIT``, ``NEGOTIATE``,
    ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE``, ``MEMCPY_OUT_FUSION_BUFFER``)."""
    import torch
    import torch.distributed as dist

    import backends.horovod as hvd
    from backends.trace import Tracer
    from simulator.core.engine import Trace

    x, y = _data(widths, batch)
    model, opt = _horovod_training(build, widths, fusion_threshold_mb, cycle_time_ms,
                                   timeline=True)
    tracer = Tracer(rank=hvd.rank())
    try:
        for _ in range(steps):
            dist.barrier()
            tracer.trace.spans.clear()
            hvd.timeline(clear=True)
            start = time.perf_counter()
            opt.zero_grad()
            with tracer.span("compute", "forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            with tracer.span("compute", "backward"):
                loss.backward()  # type: ignore[no-untyped-call]
            with tracer.span("wait", "synchronize"):
                opt.synchronize()
            with tracer.span("compute", "optimizer"), opt.skip_synchronize():
                opt.step()
            end = time.perf_counter()
        background = [s for s in hvd.timeline() if s.end >= start and s.start <= end]
        mine = tracer.trace.to_records() + Trace(background).to_records()
    finally:
        hvd.shutdown()
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, mine)
    return [r for part in parts for r in part]


def whole_model_rank(build: Build, widths: Sequence[int], batch: int, repeats: int,
                     warmup: int = 3) -> tuple[float, float, float]:
    """Rank function: the model's forward, backward and SGD step, timed as a training step runs
    them (``zero_grad(set_to_none=True)`` first, so backward allocates its gradients), with
    no communication; medians over ``repeats``, s. Copies start each repeat together."""
    import torch
    import torch.distributed as dist

    from backends.device import on_device, synchronizer, to_device

    torch.set_num_threads(1)
    model = on_device(build(widths))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = to_device((torch.randn(batch, widths[0]), torch.randn(batch, widths[-1])))

    synchronize = synchronizer()

    def clock() -> float:  # after the device's queued work
        synchronize()
        return time.perf_counter()

    samples: list[tuple[float, float, float]] = []
    for k in range(warmup + repeats):
        dist.barrier()
        opt.zero_grad(set_to_none=True)
        t0 = clock()
        loss = torch.nn.functional.mse_loss(model(x), y)
        t1 = clock()
        loss.backward()  # type: ignore[no-untyped-call]
        t2 = clock()
        opt.step()
        t3 = clock()
        if k >= warmup:
            samples.append((t1 - t0, t2 - t1, t3 - t2))
    fwd, bwd, step = (statistics.median(part) for part in zip(*samples, strict=True))
    return fwd, bwd, step


SMALL_MESSAGE_BYTES = 8
"""A negotiation's bit vector for up to 60 tensors: one int64 word."""


def small_messages(rounds: int, repeats: int) -> tuple[float, float]:
    """Rank function: (idle, busy) seconds per hop of ``SMALL_MESSAGE_BYTES`` messages.

    Idle: ranks 0 and 1 bounce a message ``rounds`` times while the other ranks wait (half a
    round trip). Busy: every rank's main thread multiplies matrices while a second thread
    passes a message round the ring of all ranks, each step (send right, receive from the
    left) waiting for the last, ``rounds`` steps (time per step). Medians over ``repeats``."""
    import threading

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    r, p = dist.get_rank(), dist.get_world_size()
    buf, slot = (torch.zeros(SMALL_MESSAGE_BYTES, dtype=torch.uint8) for _ in range(2))
    x, w = torch.randn(32, 1024), torch.randn(1024, 1024)

    def bounce(out: list[float]) -> None:
        start = time.perf_counter()
        for _ in range(rounds):
            if r == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif r == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
        out.append((time.perf_counter() - start) / (2 * rounds))

    def chain(out: list[float]) -> None:
        start = time.perf_counter()
        for _ in range(rounds):
            works = (dist.irecv(slot, (r - 1) % p), dist.isend(buf, (r + 1) % p))
            for work in works:
                if work is not None:
                    work.wait()
        out.append((time.perf_counter() - start) / rounds)

    idle: list[float] = []
    busy: list[float] = []
    for k in range(repeats + 1):
        dist.barrier()
        bounce(idle)
        dist.barrier()
        side = threading.Thread(target=chain, args=(busy,))
        side.start()
        while side.is_alive():
            torch.mm(x, w)
        side.join()
        if k == 0:  # warm-up
            idle.clear()
            busy.clear()
    return statistics.median(idle), statistics.median(busy)


RING_STEP_COUNT = 16
"""Dependent ring steps per timed call of :func:`ring_step_rank`."""


def ring_step_rank(count: int, repeats: int) -> float:
    """Rank function: what one wait of a tiny ring all-reduce costs with the main threads
    idle, s — a step of a ring of :data:`backends.tensor_parallel.measure.WAIT_BYTES` messages
    among all ranks (each sends to its left neighbour and blocks until its right one's arrives,
    :func:`backends.tensor_parallel.measure.ring_steps`, no compute), the *mean* of ``count``
    back-to-back steps, over ``repeats`` barrier-aligned calls — a point-to-point primitive.

    A tiny all-reduce (a bias's 4 KiB, the negotiation's bit vector) is a chain of such
    waits — gloo's worker thread sleeps on every segment and is woken when it arrives
    (:func:`simulator.ddp.waited_gloo_all_reduce`) — and on this 2-core VM a wait is
    bimodal: mostly 0.1–0.3 ms, sometimes a scheduler tick (4 ms). A step holds many of them,
    so it pays their mean (0.3 ms a step at 2 ranks, 0.5 at 4)."""
    import torch

    from backends.measure import measure
    from backends.tensor_parallel.measure import ring_steps

    torch.set_num_threads(1)
    timing = measure(ring_steps(count=count, compute=False), repeats=repeats, inner=1)
    return statistics.mean(timing.samples_s) / count


def idle_cycles_rank(cycle_time_ms: float, seconds: float) -> float:
    """Rank function: the CPU one cycle of the idle engine costs this rank, s — the process
    runs ``backends.horovod`` with no tensors for ``seconds`` (the main thread sleeps); its
    CPU time over its cycles, every thread's: the background thread's bookkeeping and gloo's
    threads carrying the negotiation.

    The simulated background thread spends it on the shared cores every cycle: on this
    2-core VM 0.1–0.2 ms a cycle at 2 ranks, so at a 1 ms cycle time two engines keep a
    third of a core busy, which the computing main threads lose."""
    import torch

    import backends.horovod as hvd

    torch.set_num_threads(1)
    hvd.init(cycle_time_ms=cycle_time_ms)
    try:
        time.sleep(min(0.2, seconds))  # warm-up
        cycles, cpu = hvd.stats()["cycles"], time.process_time()
        time.sleep(seconds)
        cycles, cpu = hvd.stats()["cycles"] - cycles, time.process_time() - cpu
    finally:
        hvd.shutdown()
    return float(cpu / max(cycles, 1))


def waits_and_cycles_rank(count: int, repeats: int, cycle_time_ms: float,
                          seconds: float) -> tuple[float, float]:
    """Rank function: :func:`ring_step_rank` then :func:`idle_cycles_rank`, one launch."""
    return (ring_step_rank(count, repeats),
            idle_cycles_rank(cycle_time_ms, seconds))
