"""Horovod in the lab: the simulated engine calibrated from primitives, beside the real one.

Chapter 7. The model is the lab's MLP (:func:`lab.models.mlp`), trained with
``backends.horovod``'s ``DistributedOptimizer`` (SGD) on ``world`` processes of this machine.
For notebook 07 and ``benchmarks/horovod_accuracy.py``, one module per job, every name
importable from here too (``from lab import horovod as lab_hvd``):

* :mod:`lab.horovod_primitives` — :func:`measure_primitives` → :class:`Primitives`: the
  per-layer profile on one process scaled to the whole model's forward and backward timed with
  ``min(world, cores)`` copies computing at once, the SGD step, the 8-byte message latencies of
  :func:`small_message_latency_s` (idle, and beside computing main threads), the
  compute/communication interference of :func:`lab.ddp.interference`, and, in one launch
  (:func:`waits_and_cycles`), the mean ring step (what each wait of a tiny all-reduce costs)
  and the idle engine's CPU per cycle — primitives only;
* :mod:`lab.horovod_predict` — :func:`costs` → :class:`simulator.horovod.HorovodCosts` from a
  calibration entry and the primitives; :func:`predict` →
  :class:`simulator.horovod.HorovodPrediction` (step time, cycles, fused all-reduces, exposed
  communication, a timeline named as the engine names its spans); :func:`process_start_s`,
  :func:`predict_launch` — the launcher's start-up;
* :mod:`lab.horovod_measure` — :func:`measure_settings` (rank function) and :func:`timeline` →
  the real engine's step times and one traced step (:class:`~simulator.core.engine.Trace`,
  both threads);
* :mod:`lab.horovod_sweep` — :func:`sweep_points`, :func:`sweep` → :class:`Point` rows of
  predicted vs measured step time over fusion thresholds and cycle times at one world size;
  :func:`versus_ddp` → :class:`Versus` rows: Horovod against our DDP on the same model;
* :mod:`lab.horovod_plots` — :func:`plot_cycles`: predicted and measured steps drawn with a
  lane per thread;
* :mod:`lab.horovod_simulate` — ``distml-lab simulate horovod`` (:func:`run_simulate`): one
  step predicted from the calibration file alone;
* :mod:`lab.horovod_negotiation` — the engine's negotiation run in threads and drawn;
  ``lab/horovod_train.py`` — the chapter's training script, for ``distml-lab horovodrun``.

Nothing here is fitted to a Horovod measurement: the prediction uses the profile, the
calibration (ping-pong, exchanges, reduction, copy), the small-message, ring-step, idle-cycle
and interference primitives and the core count.
"""

from __future__ import annotations

from lab.horovod_measure import measure_settings, measured_timeline, timeline
from lab.horovod_plots import COLOURS, LANES, plot_cycles
from lab.horovod_predict import (
    DEFAULT_BATCH,
    DEFAULT_WIDTHS,
    SMOKE_WIDTHS,
    MiB,
    costs,
    negotiation_bytes,
    predict,
    predict_launch,
    process_start_s,
    settings,
)
from lab.horovod_primitives import (
    RING_STEP_COUNT,
    SMALL_MESSAGE_BYTES,
    Primitives,
    measure_primitives,
    profile,
    small_message_latency_s,
    waits_and_cycles,
)
from lab.horovod_simulate import (
    MAX_LAYERS,
    MAX_WIDTH,
    MIN_CYCLE_TIME_MS,
    run_simulate,
    simulate_arguments,
    simulate_table,
)
from lab.horovod_sweep import (
    CYCLES_MS,
    THRESHOLDS_MB,
    Point,
    Versus,
    sweep,
    sweep_points,
    versus_ddp,
)

__all__ = [
    "COLOURS", "CYCLES_MS", "DEFAULT_BATCH", "DEFAULT_WIDTHS", "LANES", "MAX_LAYERS", "MAX_WIDTH",
    "MIN_CYCLE_TIME_MS", "RING_STEP_COUNT", "SMALL_MESSAGE_BYTES", "SMOKE_WIDTHS",
    "THRESHOLDS_MB", "MiB", "Point", "Primitives", "Versus", "costs", "measure_primitives",
    "measure_settings", "measured_timeline", "negotiation_bytes", "plot_cycles", "predict",
    "predict_launch", "process_start_s", "profile", "run_simulate", "settings",
    "simulate_arguments", "simulate_table", "small_message_latency_s", "sweep", "sweep_points",
    "timeline", "versus_ddp", "waits_and_cycles",
]
