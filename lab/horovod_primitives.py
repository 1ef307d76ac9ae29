"""The primitives a Horovod step is predicted from, measured on this machine.

Chapter 7. Besides the calibration file (ping-pong, exchanges, reduction, copy), the
prediction of :func:`lab.horovod_predict.predict` uses only what is measured here, each a
primitive and none fitted to a Horovod measurement (:class:`Primitives`):

* the per-layer profile on one process, scaled to the whole model's forward and backward
  timed with ``min(world, cores)`` copies computing at once, and the SGD step
  (:func:`profile`);
* the 8-byte message latencies of :func:`small_message_latency_s` (idle, and beside
  computing main threads);
* in one launch (:func:`waits_and_cycles`), the mean ring step (what each wait of a tiny
  all-reduce costs) and the idle engine's CPU per cycle;
* the compute/communication interference of :func:`lab.ddp.interference`.

:func:`measure_primitives` measures them all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simulator.ddp import Interference, Workload


def _whole_model_rank(widths: Sequence[int], batch: int, repeats: int,
                      warmup: int = 3) -> tuple[float, float, float]:
    """Rank function: the MLP's forward, backward and SGD step, timed as a training step runs
    them (``zero_grad(set_to_none=True)`` first, so backward allocates its gradients), with
    no communication; medians over ``repeats``, s. Copies start each repeat together."""
    import torch
    import torch.distributed as dist

    from lab.models import mlp

    torch.set_num_threads(1)
    model = mlp(widths, 0, torch.nn.ReLU)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, widths[0]), torch.randn(batch, widths[-1])
    samples: list[tuple[float, float, float]] = []
    for k in range(warmup + repeats):
        dist.barrier()
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x), y)
        t1 = time.perf_counter()
        loss.backward()  # type: ignore[no-untyped-call]
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if k >= warmup:
            samples.append((t1 - t0, t2 - t1, t3 - t2))
    fwd, bwd, step = (statistics.median(part) for part in zip(*samples, strict=True))
    return fwd, bwd, step


@dataclass(frozen=True)
class Primitives:
    """What the prediction is built from besides the calibration file, all primitives.

    Attributes:
        workload: per-layer forward and backward times, s (the one-process per-layer profile,
            scaled to the whole model's forward and backward measured with ``copies``
            processes computing at once — shared cache and memory bandwidth, no
            communication, as calibration measures compute).
        optimizer_s: one SGD step over the whole model, the same way, s.
        copies: processes that computed at once (``min(world, cores)``).
        small_latency_s: one-way time of an 8-byte message, the other ranks idle, s.
        busy_latency_s: the same while every rank's main thread multiplies matrices, s.
        interference: compute and communication speeds while both run (:func:`lab.ddp.
            interference`), or ``None``.
        ring_step_s: one step of a ring of tiny messages among all ranks, every rank sending
            to its left neighbour and waiting for its right one's, back to back — the mean
            (:func:`waits_and_cycles`; 0: not measured), s.
        cycle_cpu_s: CPU time one cycle of the idle engine takes on each rank, all its
            threads (:func:`waits_and_cycles`; 0: not measured), s.
    """

    workload: Workload
    optimizer_s: float
    copies: int
    small_latency_s: float
    busy_latency_s: float
    interference: Interference | None
    ring_step_s: float = 0.0
    cycle_cpu_s: float = 0.0


def profile(widths: Sequence[int], batch: int, copies: int = 1, repeats: int = 10) -> tuple[
        Workload, float]:
    """The per-layer profile on one process (:func:`lab.ddp.profile_layers`, for the split
    between layers), scaled to the whole model's forward and backward timed with ``copies``
    processes at once; and the optimizer step's time, s."""
    from backends.launch import spawn
    from lab.ddp import profile_layers

    layers = profile_layers(widths, batch, repeats)
    timed = spawn(_whole_model_rank, copies, list(widths), batch, repeats, timeout=120)
    fwd, bwd, step = (statistics.median(t[i] for t in timed) for i in range(3))
    f_scale = fwd / max(sum(x.forward_s for x in layers.layers), 1e-12)
    b_scale = bwd / max(sum(x.backward_s for x in layers.layers), 1e-12)
    scaled = tuple(replace(x, forward_s=x.forward_s * f_scale, backward_s=x.backward_s * b_scale)
                   for x in layers.layers)
    return Workload(scaled, batch), step


def measure_primitives(widths: Sequence[int], batch: int, world: int, cores: int,
                       interference: bool = True, repeats: int = 10, rounds: int = 100,
                       idle_s: float = 0.6) -> Primitives:
    """Every primitive :func:`lab.horovod_predict.predict` needs at ``world`` ranks on a host
    of ``cores`` (``repeats``: of the profile; ``rounds``: hops per repeat of
    :func:`small_message_latency_s`; ``idle_s``: how long :func:`waits_and_cycles` runs the
    idle engine — fewer and shorter for a quick look)."""
    from lab.ddp import interference as measure_interference

    copies = max(1, min(world, cores))
    workload, optimizer_s = profile(widths, batch, copies, repeats)
    idle, busy = small_message_latency_s(world, rounds, repeats=max(3, repeats // 2))
    return Primitives(workload, optimizer_s, copies, idle, busy,
                      measure_interference(world) if interference and world > 1 else None,
                      *waits_and_cycles(world, repeats=max(3, repeats), seconds=idle_s))


SMALL_MESSAGE_BYTES = 8
"""A negotiation's bit vector for up to 60 tensors: one int64 word."""


def _small_messages(rounds: int, repeats: int) -> tuple[float, float]:
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


def small_message_latency_s(world: int, rounds: int = 100, repeats: int = 5
                            ) -> tuple[float, float]:
    """What each hop of a latency-bound collective (the negotiation's bit-vector all-reduce,
    a bias's all-reduce) costs, s: ``(idle, busy)`` — point-to-point primitives.

    Idle: the one-way time of an 8-byte message between ranks 0 and 1, the others asleep in a
    receive, as they are while the one non-empty segment of a tiny ring all-reduce travels.
    Busy: one step of a ring of dependent 8-byte exchanges among all ``world`` ranks while
    every rank's main thread computes, as during forward and backward: each step's receiver
    must be woken and get a core, and with more runnable threads than cores that can mean
    waiting for a time slice (0.06 ms idle; 0.3–1 ms per step at 2 ranks, several ms at 4 on
    this 2-core VM). The calibration's α and busy latency are fitted on 1 KiB–64 MiB
    messages, without computing threads, and say neither."""
    from backends.launch import spawn

    if world < 2:
        return 0.0, 0.0
    idle, busy = spawn(_small_messages, world, rounds, repeats, timeout=120)[0]
    return float(idle), float(busy)


RING_STEP_COUNT = 16
"""Dependent ring steps per timed call of :func:`_ring_steps_rank`."""


def _ring_steps_rank(count: int, repeats: int) -> float:
    """Rank function: what one wait of a tiny ring all-reduce costs with the main threads
    idle, s — a step of a ring of :data:`lab.tensor_parallel.WAIT_BYTES` messages among all
    ranks (each sends to its left neighbour and blocks until its right one's arrives,
    :func:`lab.tensor_parallel.ring_steps`, no compute), the *mean* of ``count`` back-to-back
    steps, over ``repeats`` barrier-aligned calls — a point-to-point primitive.

    A tiny all-reduce (a bias's 4 KiB, the negotiation's bit vector) is a chain of such
    waits — gloo's worker thread sleeps on every segment and is woken when it arrives
    (:func:`simulator.ddp.waited_gloo_all_reduce`) — and on this 2-core VM a wait is
    bimodal: mostly 0.1–0.3 ms, sometimes a scheduler tick (4 ms). A step holds many of them,
    so it pays their mean (0.3 ms a step at 2 ranks, 0.5 at 4)."""
    import torch

    from backends.measure import measure
    from lab.tensor_parallel import ring_steps

    torch.set_num_threads(1)
    timing = measure(ring_steps(count=count, compute=False), repeats=repeats, inner=1)
    return statistics.mean(timing.samples_s) / count


def _idle_cycles_rank(cycle_time_ms: float, seconds: float) -> float:
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


def _waits_and_cycles_rank(count: int, repeats: int, cycle_time_ms: float,
                           seconds: float) -> tuple[float, float]:
    """Rank function: :func:`_ring_steps_rank` then :func:`_idle_cycles_rank`, one launch."""
    return (_ring_steps_rank(count, repeats),
            _idle_cycles_rank(cycle_time_ms, seconds))


def waits_and_cycles(world: int, count: int = RING_STEP_COUNT, repeats: int = 10,
                     cycle_time_ms: float = 1.0, seconds: float = 0.6) -> tuple[float, float]:
    """Two primitives measured in one launch of ``world`` processes, s (medians over ranks):
    the mean ring step of a tiny all-reduce's waits (:func:`_ring_steps_rank`) and the idle
    engine's CPU per cycle (:func:`_idle_cycles_rank`); ``(0, 0)`` for one rank."""
    from backends.launch import spawn

    if world < 2:
        return 0.0, 0.0
    rows = spawn(_waits_and_cycles_rank, world, count, repeats, cycle_time_ms, seconds,
                 timeout=120)
    return (float(statistics.median(r[0] for r in rows)),
            float(statistics.median(r[1] for r in rows)))
