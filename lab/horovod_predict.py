"""A Horovod step predicted on this machine: the simulated engine priced from primitives.

Chapter 7. The model is the lab's MLP (:func:`lab.models.mlp`) trained with
``backends.horovod``'s ``DistributedOptimizer`` (SGD) on ``world`` processes of this machine.
:func:`costs` turns a calibration entry and the :class:`~lab.horovod_primitives.Primitives`
into :class:`simulator.horovod.HorovodCosts`; :func:`predict` runs
:func:`simulator.horovod.predict_step` with them → :class:`simulator.horovod.HorovodPrediction`
(step time, cycles, fused all-reduces, exposed communication, a timeline named as the engine
names its spans). :func:`process_start_s` and :func:`predict_launch` do the same for the
launcher's start-up.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import replace

from lab.horovod_primitives import Primitives
from simulator.core.calibration import CalibrationEntry
from simulator.core.hardware import Cluster
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
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster

MiB = 2**20
DEFAULT_WIDTHS = (1024,) * 7
"""The benchmark's MLP: six 1024×1024 ``Linear`` layers, 24 MiB of float32 parameters."""
DEFAULT_BATCH = 32
SMOKE_WIDTHS = (256,) * 5
"""A small MLP (1 MiB) for smoke runs and the notebook's quick mode."""


def settings(fusion_threshold_mb: float, cycle_time_ms: float, world: int) -> HorovodSettings:
    """The engine's settings: the threshold rounded as the engine rounds it (all ``world``
    ranks on this one machine), the cycle time in seconds."""
    threshold = effective_threshold(int(fusion_threshold_mb * MiB), world)
    return HorovodSettings(threshold, cycle_time_ms * 1e-3)


def negotiation_bytes(tensors: int) -> int:
    """Bytes of the negotiation's bit vector: three status bits and a bit per cached tensor,
    63 bits to an int64 word (``backends.horovod.negotiation``)."""
    return 8 * max(1, -(-(3 + min(tensors, CACHE_CAPACITY)) // 63))


def latency_view(entry: CalibrationEntry, latency_s: float) -> CalibrationEntry:
    """``entry`` with every message paying ``latency_s``, alone or among others (α and the
    concurrent exchanges' latency both ``latency_s``, the chains of dependent messages
    cleared): the cluster of a measured wait (:func:`costs`' small all-reduces)."""
    return replace(entry, latency_s=latency_s, bus_latency_s=latency_s, chain_latency_s=[],
                   chain_ahead_latency_s=[])


def latency_cluster(entry: CalibrationEntry, world: int, latency_s: float) -> Cluster:
    """The host tier (:data:`~simulator.host.effects.BUSY_HOST`) of :func:`latency_view`."""
    return local_cluster(latency_view(entry, latency_s), world, effects=BUSY_HOST)


def predict(entry: CalibrationEntry, primitives: Primitives, world: int,
            fusion_threshold_mb: float, cycle_time_ms: float,
            model: str = "host") -> HorovodPrediction:
    """The simulated step on the calibrated local cluster in tier ``model``
    (:func:`simulator.host.factory.local_cluster`; the host tier
    :data:`~simulator.host.effects.BUSY_HOST`), every rank's threads sharing ``entry.cores``,
    priced by :func:`costs`."""
    cluster = local_cluster(entry, world, model, effects=BUSY_HOST)
    return predict_step(cluster, primitives.workload,
                        settings(fusion_threshold_mb, cycle_time_ms, world),
                        costs(entry, world, primitives, model), cores=float(entry.cores),
                        interference=primitives.interference)


def costs(entry: CalibrationEntry, world: int, primitives: Primitives,
          model: str = "host") -> HorovodCosts:
    """The engine's costs on the calibrated machine, in tier ``model``.

    The textbook tier prices every all-reduce, the negotiation's included, as gloo's ring on
    :func:`simulator.host.factory.textbook_cluster` (α, B, the shared bus, γ), with the copy
    rate, the measured SGD step and the idle engine's CPU per cycle. The host tier:

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

    tensors = len(primitives.workload.param_sizes)
    optimizer_Bps = primitives.workload.param_bytes / max(primitives.optimizer_s, 1e-12)
    cluster = gloo_ring_cluster(entry, world, model)  # the textbook tier: the entry's α, B
    if model == "textbook" or world < 2 or primitives.small_latency_s <= 0:
        return HorovodCosts.on(cluster, negotiation_bytes(tensors), optimizer_Bps=optimizer_Bps,
                               cycle_cpu_s=primitives.cycle_cpu_s)
    if primitives.ring_step_s > 0:  # each wait of a tiny all-reduce: a ring step's mean
        wait = max(primitives.ring_step_s - WAIT_BYTES / entry.bandwidth_Bps, 0.0)
        small, program = latency_cluster(entry, world, wait), waited_gloo_all_reduce
    else:
        small = local_cluster(entry, world, effects=BUSY_HOST)
        program = gloo_ring_all_reduce
    return HorovodCosts.on(
        cluster, negotiation_bytes(tensors), small_cluster=small,
        small_busy_cluster=latency_cluster(entry, world, max(primitives.busy_latency_s,
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
