"""Horovod, simulated: launcher start-up, the background thread's cycle, negotiation, fusion.

Twin of :mod:`backends.horovod`; book chapter 7. Read in this order:

* :mod:`~simulator.horovod.fusion` — ``FuseResponses``: which ready tensors share one fused
  all-reduce (a pure function, the same rule as the real engine's);
* :mod:`~simulator.horovod.cycle_model` — the chapter's α-β model of the cycle: the
  self-clocked fixed point {eq}`eq-horovod-cycle` and the loop stepped cycle by cycle;
* :mod:`~simulator.horovod.step` — one training step on a cluster: backward enqueuing
  gradients, the background thread negotiating and performing fused responses, the optimizer;
  step time, cycles, fused all-reduces, exposed communication and a timeline;
* :mod:`~simulator.horovod.startup` — ``horovodrun``'s start-up: task processes started and
  registered with the driver.
"""

from simulator.horovod.cycle_model import (
    CycleTimeline,
    cycle_fixed_point,
    cycle_timeline,
    ring_cost,
    uniform_cycle_timeline,
)
from simulator.horovod.fusion import Response, effective_threshold, fuse_responses
from simulator.horovod.startup import StartupPrediction, predict_startup
from simulator.horovod.step import (
    DEFAULT_CYCLE_TIME_S,
    DEFAULT_FUSION_THRESHOLD_BYTES,
    HorovodCosts,
    HorovodPrediction,
    HorovodSettings,
    predict_step,
)

__all__ = [
    "DEFAULT_CYCLE_TIME_S",
    "DEFAULT_FUSION_THRESHOLD_BYTES",
    "CycleTimeline",
    "HorovodCosts",
    "HorovodPrediction",
    "HorovodSettings",
    "Response",
    "StartupPrediction",
    "cycle_fixed_point",
    "cycle_timeline",
    "effective_threshold",
    "fuse_responses",
    "predict_startup",
    "predict_step",
    "ring_cost",
    "uniform_cycle_timeline",
]
