"""The primitives a Horovod step is predicted from, measured on this machine.

Chapter 7. Besides the calibration file (ping-pong, exchanges, reduction, copy), the
prediction of :func:`lab.horovod_predict.predict` uses only what is measured here, each a
primitive and none fitted to a Horovod measurement (:class:`Primitives`; their rank code lives
in :mod:`backends.horovod.measure`):

* the per-layer profile on one process, scaled to the whole model's forward and backward
  timed with ``min(world, cores)`` copies computing at once, and the SGD step
  (:func:`profile`);
* the 8-byte message latencies of :func:`small_message_latency_s` (idle, and beside
  computing main threads, :data:`SMALL_MESSAGE_BYTES`);
* in one launch (:func:`waits_and_cycles`), the mean ring step (what each wait of a tiny
  all-reduce costs) and the idle engine's CPU per cycle;
* the compute/communication interference of :func:`lab.ddp.interference`.

:func:`measure_primitives` measures them all.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from backends.horovod import measure as hvd_measure
from backends.horovod.measure import RING_STEP_COUNT, SMALL_MESSAGE_BYTES
from lab.ddp.profiling import build_mlp
from simulator.ddp import Interference, Workload

__all__ = ["RING_STEP_COUNT", "SMALL_MESSAGE_BYTES", "Primitives", "measure_primitives",
           "profile", "small_message_latency_s", "waits_and_cycles"]


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
    timed = spawn(hvd_measure.whole_model_rank, copies, build_mlp, list(widths), batch, repeats,
                  timeout=120)
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
    idle, busy = spawn(hvd_measure.small_messages, world, rounds, repeats, timeout=120)[0]
    return float(idle), float(busy)


def waits_and_cycles(world: int, count: int = RING_STEP_COUNT, repeats: int = 10,
                     cycle_time_ms: float = 1.0, seconds: float = 0.6) -> tuple[float, float]:
    """Two primitives measured in one launch of ``world`` processes, s (medians over ranks):
    the mean ring step of a tiny all-reduce's waits (:func:`backends.horovod.measure.
    ring_step_rank`) and the idle engine's CPU per cycle (:func:`backends.horovod.measure.
    idle_cycles_rank`); ``(0, 0)`` for one rank."""
    from backends.launch import spawn

    if world < 2:
        return 0.0, 0.0
    rows = spawn(hvd_measure.waits_and_cycles_rank, world, count, repeats, cycle_time_ms,
                 seconds, timeout=120)
    return (float(statistics.median(r[0] for r in rows)),
            float(statistics.median(r[1] for r in rows)))
