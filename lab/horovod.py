"""Horovod in the lab: the simulated engine calibrated from primitives, beside the real one.

Chapter 7. The model is the lab's MLP (:func:`lab.models.mlp`), trained with
``backends.horovod``'s ``DistributedOptimizer`` (SGD) on ``world`` processes of this machine.
For notebook 07 and ``benchmarks/horovod_accuracy.py``:

* :func:`measure_primitives` → :class:`Primitives`: the per-layer profile on one process
  scaled to the whole model's forward and backward timed with ``min(world, cores)`` copies
  computing at once, the SGD step, the 8-byte message latencies of
  :func:`small_message_latency_s` (idle, and beside computing main threads), the
  compute/communication interference of :func:`lab.ddp.interference`, and, in one launch
  (:func:`waits_and_cycles`), the mean ring step (what each wait of a tiny all-reduce costs)
  and the idle engine's CPU per cycle — primitives only;
* :func:`costs` → :class:`simulator.horovod.HorovodCosts` from a calibration entry and the
  primitives; :func:`predict` → :class:`simulator.horovod.HorovodPrediction` (step time,
  cycles, fused all-reduces, exposed communication, a timeline named as the engine names its
  spans);
* :func:`measure_settings` (rank function) and :func:`timeline` → the real engine's step
  times and one traced step (:class:`~simulator.core.engine.Trace`, both threads);
* :func:`sweep_points`, :func:`sweep` → :class:`Point` rows of predicted vs measured step
  time over fusion thresholds and cycle times at one world size;
* :func:`versus_ddp` → :class:`Versus` rows: Horovod against our DDP on the same model;
* :func:`process_start_s`, :func:`predict_launch` — the launcher's start-up;
* :func:`plot_cycles` — predicted and measured steps drawn with a lane per thread;
* ``distml-lab simulate horovod`` (:func:`run_simulate`): one step predicted from the
  calibration file alone.

Nothing here is fitted to a Horovod measurement: the prediction uses the profile, the
calibration (ping-pong, exchanges, reduction, copy), the small-message, ring-step, idle-cycle
and interference primitives and the core count.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from simulator.core.calibration import CalibrationEntry
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.ddp import Interference, Workload
from simulator.horovod import (
    HorovodCosts,
    HorovodPrediction,
    HorovodSettings,
    StartupPrediction,
    effective_threshold,
    predict_startup,
    predict_step,
)
from simulator.horovod.step import CACHE_CAPACITY
from simulator.host import cluster_from_entry

MiB = 2**20
DEFAULT_WIDTHS = (1024,) * 7
"""The benchmark's MLP: six 1024×1024 ``Linear`` layers, 24 MiB of float32 parameters."""
DEFAULT_BATCH = 32
SMOKE_WIDTHS = (256,) * 5
"""A small MLP (1 MiB) for smoke runs and the notebook's quick mode."""
THRESHOLDS_MB = (0.0, 1.0, 4.0, 16.0, 64.0)
"""The fusion-threshold sweep, MiB (0: no fusion)."""
CYCLES_MS = (0.5, 2.0, 8.0, 25.0)
"""The cycle-time sweep, ms."""


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
    """Every primitive :func:`predict` needs at ``world`` ranks on a host of ``cores``
    (``repeats``: of the profile; ``rounds``: hops per repeat of
    :func:`small_message_latency_s`; ``idle_s``: how long :func:`waits_and_cycles` runs the
    idle engine — fewer and shorter for a quick look)."""
    from lab.ddp import interference as measure_interference

    copies = max(1, min(world, cores))
    workload, optimizer_s = profile(widths, batch, copies, repeats)
    idle, busy = small_message_latency_s(world, rounds, repeats=max(3, repeats // 2))
    return Primitives(workload, optimizer_s, copies, idle, busy,
                      measure_interference(world) if interference and world > 1 else None,
                      *waits_and_cycles(world, repeats=max(3, repeats), seconds=idle_s))


def settings(fusion_threshold_mb: float, cycle_time_ms: float, world: int) -> HorovodSettings:
    """The engine's settings: the threshold rounded as the engine rounds it (all ``world``
    ranks on this one machine), the cycle time in seconds."""
    threshold = effective_threshold(int(fusion_threshold_mb * MiB), world)
    return HorovodSettings(threshold, cycle_time_ms * 1e-3)


def negotiation_bytes(tensors: int) -> int:
    """Bytes of the negotiation's bit vector: three status bits and a bit per cached tensor,
    63 bits to an int64 word (``backends.horovod.negotiation``)."""
    return 8 * max(1, -(-(3 + min(tensors, CACHE_CAPACITY)) // 63))


def predict(entry: CalibrationEntry, primitives: Primitives, world: int,
            fusion_threshold_mb: float, cycle_time_ms: float) -> HorovodPrediction:
    """The simulated step on the calibrated local cluster, every rank's threads sharing
    ``entry.cores``, priced by :func:`costs`."""
    cluster = cluster_from_entry(entry, world_size=world)
    return predict_step(cluster, primitives.workload,
                        settings(fusion_threshold_mb, cycle_time_ms, world),
                        costs(entry, world, primitives), cores=float(entry.cores),
                        interference=primitives.interference)


# ---- primitives ------------------------------------------------------------------------------

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


def costs(entry: CalibrationEntry, world: int, primitives: Primitives) -> HorovodCosts:
    """The engine's costs on the calibrated machine.

    * Fused all-reduces of at least :data:`lab.calibrate.EXCHANGE_MIN_BYTES` (where the
      calibration's exchange measurement starts) on the calibrated cluster as gloo's ring
      sees it (:func:`lab.ddp.gloo_ring_cluster`: every segment pays the concurrent
      exchanges' latency, not the chain of dependent 4 KiB messages) — bandwidth-bound,
      run on the shared cores with the measured interference;
    * smaller ones and the negotiation's bit vector (:func:`negotiation_bytes`, int64
      words) — latency-bound — as a chain of waits, one per segment received
      (:func:`simulator.ddp.waited_gloo_all_reduce`), each costing the mean ring step of
      :attr:`Primitives.ring_step_s` (measured alone at 4 KiB: 1.5 ms at 2 ranks, 5.4 at 4;
      4 and 12 waits of 0.34 and 0.48 ms); while the main threads compute, gloo's ring with
      every message paying :attr:`Primitives.busy_latency_s`. Not measured
      (``ring_step_s`` 0): gloo's ring on the calibrated cluster with its chain latencies;
    * the copy rate for the fusion buffer and the averaging pass; the measured SGD step.

    A latency of 0 means "not measured": the calibrated cluster prices everything."""
    from lab.calibrate import EXCHANGE_MIN_BYTES
    from lab.ddp import gloo_ring_cluster
    from lab.tensor_parallel import WAIT_BYTES
    from simulator.ddp import gloo_ring_all_reduce, waited_gloo_all_reduce

    def with_latency(latency_s: float) -> Cluster:
        return cluster_from_entry(replace(entry, latency_s=latency_s,
                                                bus_latency_s=latency_s, chain_latency_s=[],
                                                chain_ahead_latency_s=[]), world_size=world)

    cluster = gloo_ring_cluster(entry, world)
    tensors = len(primitives.workload.param_sizes)
    optimizer_Bps = primitives.workload.param_bytes / max(primitives.optimizer_s, 1e-12)
    if world < 2 or primitives.small_latency_s <= 0:
        return HorovodCosts.on(cluster, negotiation_bytes(tensors), optimizer_Bps=optimizer_Bps,
                               cycle_cpu_s=primitives.cycle_cpu_s)
    if primitives.ring_step_s > 0:  # each wait of a tiny all-reduce: a ring step's mean
        wait = max(primitives.ring_step_s - WAIT_BYTES / entry.bandwidth_Bps, 0.0)
        small, program = with_latency(wait), waited_gloo_all_reduce
    else:
        small, program = cluster_from_entry(entry, world_size=world), gloo_ring_all_reduce
    return HorovodCosts.on(
        cluster, negotiation_bytes(tensors), small_cluster=small,
        small_busy_cluster=with_latency(max(primitives.busy_latency_s,
                                            primitives.small_latency_s)),
        small_bytes=EXCHANGE_MIN_BYTES, small_program=program, optimizer_Bps=optimizer_Bps,
        cycle_cpu_s=primitives.cycle_cpu_s)


# ---- the launcher's start-up -----------------------------------------------------------------

def process_start_s(repeats: int = 3) -> float:
    """Median wall time of ``python -c "import torch"`` alone, s: what starting one task
    process costs on this machine (a primitive; one process, nothing else started)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def predict_launch(entry: CalibrationEntry, world: int, start_s: float) -> StartupPrediction:
    """``horovodrun -np world`` on this host: ``start_s`` per task (:func:`process_start_s`)
    on the shared cores, messages at the calibrated latency."""
    return predict_startup(world, start_s, entry.latency_s, float(entry.cores))


# ---- the real side (rank functions, run under backends.launch.spawn) -------------------------

def _data(widths: Sequence[int], batch: int) -> tuple[Any, Any]:
    import torch
    import torch.distributed as dist

    gen = torch.Generator().manual_seed(dist.get_rank())
    return (torch.randn(batch, widths[0], generator=gen),
            torch.randn(batch, widths[-1], generator=gen))


def _horovod_training(widths: Sequence[int], fusion_threshold_mb: float, cycle_time_ms: float,
                      timeline: bool = False) -> tuple[Any, Any]:
    """``hvd.init`` with these settings, the MLP and its ``DistributedOptimizer`` (SGD)."""
    import torch

    import backends.horovod as hvd
    from lab.models import mlp

    hvd.init(cycle_time_ms=cycle_time_ms, fusion_threshold_bytes=int(fusion_threshold_mb * MiB),
             timeline=timeline)
    model = mlp(widths, 0, torch.nn.ReLU)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    return model, opt


def measure_settings(widths: Sequence[int], batch: int,
                     points: Sequence[tuple[float, float]], repeats: int = 10,
                     rounds: int = 2, warmup: int = 3) -> list[dict[str, Any]]:
    """Rank function: the real engine's step time at each ``(fusion threshold MiB, cycle time
    ms)``. A setting needs its own engine (``init`` … ``shutdown``), so repeats are
    interleaved by rounds: each round visits every point and takes ``repeats / rounds``
    samples (``warmup`` steps first: the response cache fills in the first). A sample is one
    training step, barrier-aligned, the slowest rank's time. Also each point's
    :func:`backends.horovod.stats` per step (cycles, fused all-reduces)."""
    import torch

    import backends.horovod as hvd
    from backends.measure import Timing, measure

    x, y = _data(widths, batch)
    samples: dict[int, list[float]] = {i: [] for i in range(len(points))}
    counters: dict[int, dict[str, float]] = {}
    per_round = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for i, (threshold_mb, cycle_ms) in enumerate(points):
            model, opt = _horovod_training(widths, threshold_mb, cycle_ms)
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


def measured_timeline(widths: Sequence[int], batch: int, fusion_threshold_mb: float,
                      cycle_time_ms: float, steps: int = 4) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps, every rank: the main
    thread's (``compute`` forward, ``compute`` backward, ``wait`` synchronize, ``compute``
    optimizer, instants ``ENQUEUE``) and the background thread's (``WAIT``, ``NEGOTIATE``,
    ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE``, ``MEMCPY_OUT_FUSION_BUFFER``)."""
    import torch
    import torch.distributed as dist

    import backends.horovod as hvd
    from backends.trace import Tracer

    x, y = _data(widths, batch)
    model, opt = _horovod_training(widths, fusion_threshold_mb, cycle_time_ms, timeline=True)
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


def timeline(world: int, widths: Sequence[int], batch: int, fusion_threshold_mb: float,
             cycle_time_ms: float) -> Trace:
    """One measured step of the real engine on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(measured_timeline, world, list(widths), batch, fusion_threshold_mb,
                    cycle_time_ms, timeout=120)[0]
    return Trace.from_records(records).shifted()


@dataclass(frozen=True)
class Point:
    """One (fusion threshold, cycle time) at one world size: prediction beside measurement.

    Times in s; ``sweep`` is ``"threshold"`` or ``"cycle"`` (which knob the point varies).
    """

    sweep: str
    world: int
    fusion_threshold_mb: float
    cycle_time_ms: float
    predicted_s: float
    predicted_cycles: int
    predicted_all_reduces: int
    exposed_comm_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float
    measured_cycles: float
    measured_all_reduces: float

    @property
    def rel_error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted_s - self.measured_median_s) / self.measured_median_s


def sweep_points(thresholds_mb: Sequence[float] = THRESHOLDS_MB,
                 cycles_ms: Sequence[float] = CYCLES_MS, fixed_cycle_ms: float = 1.0,
                 fixed_threshold_mb: float = 128.0) -> list[tuple[str, float, float]]:
    """``(sweep, threshold MiB, cycle ms)``: thresholds at ``fixed_cycle_ms``, then cycle
    times at ``fixed_threshold_mb``."""
    return ([("threshold", t, fixed_cycle_ms) for t in thresholds_mb]
            + [("cycle", fixed_threshold_mb, c) for c in cycles_ms])


def sweep(entry: CalibrationEntry, primitives: Primitives, widths: Sequence[int], world: int,
          points: Sequence[tuple[str, float, float]], repeats: int = 10) -> list[Point]:
    """Predict and measure every point at one world size (one launch)."""
    from backends.launch import spawn

    settings_ = [(t, c) for _, t, c in points]
    rows = spawn(measure_settings, world, list(widths), primitives.workload.batch, settings_,
                 repeats, timeout=600)[0]
    out = []
    for (kind, t, c), row in zip(points, rows, strict=True):
        pred = predict(entry, primitives, world, t, c)
        out.append(Point(kind, world, t, c, pred.step_s, pred.cycles, pred.all_reduces,
                         pred.exposed_comm_s, row["median_s"], row["p10_s"], row["p90_s"],
                         row["cycles_per_step"], row["allreduces_per_step"]))
    return out


def _versus_rank(widths: Sequence[int], batch: int, points: Sequence[tuple[float, float]],
                 caps: Sequence[float | None], repeats: int) -> list[dict[str, Any]]:
    """Rank function: the real engine at ``points``, then our DDP at ``caps``, one launch."""
    from lab.ddp import measure_steps

    rows = [{"engine": "horovod", **row}
            for row in measure_settings(widths, batch, points, repeats)]
    return rows + [{"engine": "ddp", **row}
                   for row in measure_steps(widths, batch, caps, repeats, which=("ours",))]


@dataclass(frozen=True)
class Versus:
    """One engine at one setting on the same model and world: predicted beside measured (s).

    ``setting`` reads ``"threshold 128 MiB, cycle 1 ms"`` or ``"buckets 25 MiB"``;
    ``exposed_comm_s`` is the predicted communication left after backward.
    """

    world: int
    engine: str
    setting: str
    predicted_s: float
    exposed_comm_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float

    @property
    def rel_error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted_s - self.measured_median_s) / self.measured_median_s


def versus_ddp(entry: CalibrationEntry, primitives: Primitives, widths: Sequence[int],
               world: int, points: Sequence[tuple[float, float]] = ((128.0, 1.0),),
               caps_mb: Sequence[float | None] = (None,), repeats: int = 10) -> list[Versus]:
    """Horovod (at each ``(threshold MiB, cycle ms)``) against our DDP (at each bucket cap,
    ``None``: PyTorch's 25 MiB with a 1 MiB first bucket) on the same MLP and world, both
    predicted (:func:`predict`, :func:`lab.ddp.predict` with the same profile and
    interference) and measured in one launch."""
    from backends.launch import spawn
    from lab.ddp import predict as predict_ddp

    rows = spawn(_versus_rank, world, list(widths), primitives.workload.batch, list(points),
                 list(caps_mb), repeats, timeout=600)[0]
    out = []
    for row in rows:
        if row["engine"] == "horovod":
            t, c = row["fusion_threshold_mb"], row["cycle_time_ms"]
            pred = predict(entry, primitives, world, t, c)
            setting = f"threshold {t:g} MiB, cycle {c:g} ms"
            predicted, exposed = pred.step_s, pred.exposed_comm_s
        else:
            cap = row["bucket_cap_mb"]
            ddp = predict_ddp(entry, primitives.workload, world, cap,
                              contention=primitives.interference)
            setting = "buckets 25 MiB (first 1 MiB)" if cap is None else f"buckets {cap:g} MiB"
            predicted, exposed = ddp.step_s, ddp.exposed_comm_s
        out.append(Versus(world, row["engine"], setting, predicted, exposed, row["median_s"],
                          row["p10_s"], row["p90_s"]))
    return out


# ---- pictures for notebook 07 ------------------------------------------------------------------

LANES = {"compute": 0, "wait": 0, "ENQUEUE": 0, "WAIT": 1, "NEGOTIATE": 1,
         "MEMCPY_IN_FUSION_BUFFER": 1, "ALLREDUCE": 1, "MEMCPY_OUT_FUSION_BUFFER": 1}
"""Which lane of a rank each span kind is drawn in: 0 the main thread, 1 the background."""
COLOURS = {"compute": "tab:green", "wait": "tab:gray", "WAIT": "whitesmoke",
           "NEGOTIATE": "tab:orange", "MEMCPY_IN_FUSION_BUFFER": "tab:purple",
           "ALLREDUCE": "tab:red", "MEMCPY_OUT_FUSION_BUFFER": "tab:purple"}


def plot_cycles(traces: Sequence[tuple[str, Trace]], path: str | None = None) -> Any:
    """One step per panel (e.g. predicted and measured), two lanes per rank: the main thread
    (forward, backward, synchronize, optimizer; a tick per gradient enqueued) and the
    background thread (sleep, negotiate, copy in, all-reduce, copy out), so the cycle and the
    fusion can be read off."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 1.0 + 1.2 * 2 * len(traces)),
                             squeeze=False)
    end = max((s.end - min(x.start for x in t) for _, t in traces for s in t), default=0.0)
    for ax, (title, raw) in zip(axes[:, 0], traces, strict=True):
        trace = raw.shifted()
        ranks = sorted({s.rank for s in trace})
        for row, rank in enumerate(ranks):
            for s in trace.for_rank(rank):
                if s.kind not in LANES:
                    continue
                lane = 2 * row + LANES[s.kind]
                if s.kind == "ENQUEUE":  # an instant: a gradient handed to the thread
                    ax.plot([s.start * 1e3] * 2, [lane + 0.35, lane - 0.35], color="black",
                            lw=1)
                    continue
                ax.barh(lane, max(s.duration, 1e-9) * 1e3, left=s.start * 1e3, height=0.6,
                        color=COLOURS[s.kind], edgecolor="black", linewidth=0.3)
        ax.set_yticks(range(2 * len(ranks)))
        ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("main", "bg")])
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel("time (ms)")
        ax.set_xlim(0, end * 1e3 * 1.02)
    handles = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    if path:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


# ---- distml-lab simulate horovod -------------------------------------------------------------

MAX_LAYERS = 1000
"""Most widths ``--widths`` takes (each layer is a tensor the simulated step reduces)."""
MAX_WIDTH = 2**20
"""Widest layer, and largest batch, ``simulate horovod`` takes."""
MIN_CYCLE_TIME_MS = 0.001
"""Shortest cycle time ``simulate horovod`` takes, ms: every cycle is simulated."""


def _widths(text: str) -> list[int]:
    from lab.units import UsageError

    try:
        if "x" in text:
            width, _, count = text.partition("x")
            widths = [int(width)] * min(int(count), MAX_LAYERS + 1)
        else:
            widths = [int(w) for w in text.split(",")]
    except ValueError:
        widths = []
    if not 2 <= len(widths) <= MAX_LAYERS or not 1 <= min(widths) <= max(widths) <= MAX_WIDTH:
        raise UsageError(f"invalid --widths {text!r}: expected 2 to {MAX_LAYERS} widths from 1 "
                         f"to {MAX_WIDTH}, like 1024x7 (seven 1024s) or 784,512,10")
    return widths


def simulate_arguments(p: Any) -> None:
    """Options of ``distml-lab simulate horovod`` (out-of-range values: one line, exit 2)."""
    from lab.checks import MAX_SIMULATED_RANKS
    from lab.units import number, whole

    p.add_argument("--world", type=whole(1, MAX_SIMULATED_RANKS), required=True,
                   help=f"ranks p (1-{MAX_SIMULATED_RANKS})")
    p.add_argument("--fusion-threshold-mb", type=number(0, 2**20), default=128.0,
                   help="HOROVOD_FUSION_THRESHOLD in MiB (default 128; 0: no fusion)")
    p.add_argument("--cycle-time-ms", type=number(MIN_CYCLE_TIME_MS, 1e4), default=1.0,
                   help=f"HOROVOD_CYCLE_TIME in ms ({MIN_CYCLE_TIME_MS:g}-10000, default 1)")
    p.add_argument("--widths", default="x".join(map(str, (DEFAULT_WIDTHS[0],
                                                          len(DEFAULT_WIDTHS)))),
                   help="the MLP's layer widths: 1024x7 or 784,512,10 (default 1024x7)")
    p.add_argument("--batch", type=whole(1, MAX_WIDTH), default=DEFAULT_BATCH,
                   help="rows per rank (default 32)")
    p.add_argument("--cluster", default="local",
                   help="local (this machine's calibration, ranks sharing its cores; the "
                        "default) or a preset: a100, h100, ethernet-10g")
    p.add_argument("--small-latency-us", type=number(0, 1e6, lo_open=True),
                   help="local only: one-way time of an 8-byte message, idle, µs (measured by "
                        "lab.horovod.small_message_latency_s; default: the calibration's α)")
    p.add_argument("--busy-latency-us", type=number(0, 1e6, lo_open=True),
                   help="local only: the same beside computing main threads, µs (default: "
                        "as idle)")


def run_simulate(args: Any) -> dict[str, Any]:
    """``distml-lab simulate horovod``: one step predicted, with our DDP's beside it."""
    from lab.units import UsageError
    from simulator.core.calibration import find_entry
    from simulator.core.hardware import preset
    from simulator.ddp import mlp_workload
    from simulator.ddp import predict_step as predict_ddp
    from simulator.horovod import cycle_fixed_point

    if args.world < 1:
        raise UsageError(f"invalid --world {args.world}: needs at least 1 rank")
    if not (args.fusion_threshold_mb >= 0 and math.isfinite(args.fusion_threshold_mb)):
        raise UsageError(f"invalid --fusion-threshold-mb {args.fusion_threshold_mb}: "
                         "give a number of MiB ≥ 0")
    if not (args.cycle_time_ms > 0 and math.isfinite(args.cycle_time_ms)):
        raise UsageError(f"invalid --cycle-time-ms {args.cycle_time_ms}: give a number of "
                         "ms > 0")
    if args.batch < 1:
        raise UsageError(f"invalid --batch {args.batch}: needs at least 1 row")
    widths = _widths(args.widths)
    for name in ("small_latency_us", "busy_latency_us"):
        value = getattr(args, name)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise UsageError(f"invalid --{name.replace('_', '-')} {value}: give a number of "
                             "µs > 0")
    cores = math.inf
    if args.cluster == "local":
        entry = find_entry(args.world)
        cluster = cluster_from_entry(entry)
        cores = float(entry.cores)
        workload = mlp_workload(widths, args.batch, cluster.devices[0].flops_per_s)
        small = (args.small_latency_us or 0.0) * 1e-6
        busy = (args.busy_latency_us or args.small_latency_us or 0.0) * 1e-6
        optimizer_s = workload.param_bytes / cluster.devices[0].reduce_Bps
        engine_costs = costs(entry, args.world,
                             Primitives(workload, optimizer_s, 1, small, busy, None))
    else:
        if args.small_latency_us is not None or args.busy_latency_us is not None:
            raise UsageError("--small-latency-us and --busy-latency-us price this machine: "
                             "use them with --cluster local")
        cluster = preset(args.cluster, args.world)
        workload = mlp_workload(widths, args.batch, cluster.devices[0].flops_per_s)
        engine_costs = HorovodCosts.on(cluster, negotiation_bytes(len(workload.param_sizes)))
    chosen = settings(args.fusion_threshold_mb, args.cycle_time_ms, args.world)
    prediction = predict_step(cluster, workload, chosen, engine_costs, cores=cores)
    ddp = predict_ddp(cluster, workload, cores=cores)
    fixed = None
    if args.world > 1:  # a and β' of the all-reduce, read off it at two sizes
        small, large = 1 * MiB, 64 * MiB
        beta_prime = ((engine_costs.all_reduce_s(large) - engine_costs.all_reduce_s(small))
                      / (large - small))
        a = max(engine_costs.all_reduce_s(small) - small * beta_prime, 0.0)
        backward = sum(layer.backward_s for layer in workload.layers)
        point = cycle_fixed_point(workload.param_bytes, backward, a, beta_prime,
                                  engine_costs.negotiation_s)
        fixed = None if point is None else {"cycle_s": point[0], "fused_bytes": point[1],
                                            "a_s": a, "beta_prime_s_per_B": beta_prime}
    return {"world": args.world, "cluster": cluster.name, "widths": widths,
            "batch": args.batch, "parameter_bytes": workload.param_bytes,
            "tensors": len(workload.param_sizes),
            "fusion_threshold_bytes": chosen.fusion_threshold_bytes,
            "cycle_time_s": chosen.cycle_time_s, "step_s": prediction.step_s,
            "backward_end_s": prediction.backward_end_s,
            "exposed_comm_s": prediction.exposed_comm_s, "cycles": prediction.cycles,
            "fused_all_reduces": prediction.all_reduces,
            "fused_bytes": prediction.fused_bytes,
            "negotiation_s": engine_costs.negotiation_s,
            "negotiation_busy_s": engine_costs.negotiation(busy=True), "ddp_step_s": ddp.step_s,
            "self_clocked_cycle": fixed}


def simulate_table(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Human-readable lines for ``simulate horovod`` without ``--json``."""
    from lab.units import format_size

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.2f} ms"

    lines = [("cluster", doc["cluster"]),
             ("model", f"MLP {doc['widths']}, batch {doc['batch']}, "
                       f"{format_size(doc['parameter_bytes'])} in {doc['tensors']} tensors"),
             ("fusion threshold", format_size(doc["fusion_threshold_bytes"])),
             ("cycle time", ms(doc["cycle_time_s"])),
             ("step time", ms(doc["step_s"])),
             ("end of backward", ms(doc["backward_end_s"])),
             ("exposed communication", ms(doc["exposed_comm_s"])),
             ("background-thread cycles", str(doc["cycles"])),
             ("fused all-reduces", str(doc["fused_all_reduces"])),
             ("negotiation (bit-vector all-reduce)", ms(doc["negotiation_s"])),
             ("  while the main threads compute", ms(doc["negotiation_busy_s"])),
             ("our DDP's step (25 MiB buckets)", ms(doc["ddp_step_s"]))]
    if doc["self_clocked_cycle"]:
        fixed = doc["self_clocked_cycle"]
        lines.append(("self-clocked cycle L (eq-horovod-cycle)",
                      f"{ms(fixed['cycle_s'])}, {format_size(fixed['fused_bytes'])} fused"))
    return lines
