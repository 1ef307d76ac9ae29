"""DistributedDataParallel, simulated: gradient buckets all-reduced while backward still runs.

Twin of :mod:`backends.ddp`; book chapters 5–6; Li et al., "PyTorch Distributed: Experiences on
Accelerating Data Parallel Training", VLDB 2020, §3.2 (gradient bucketing, overlap with
backward). One training step on every rank::

    forward ─ backward layer L ─ layer L−1 ─ … ─ layer 1 ─ copy-out ─ optimizer
                       │ grads of bucket 0 ready      │ bucket k ready
                       └─ all-reduce bucket 0 ─ …  ───┴─ all-reduce bucket k     (comm thread)

Read in this order:

* :mod:`~simulator.ddp.buckets` — :func:`assign_buckets`, the Reducer's bucket assignment, a
  pure function shared with the real twin (reverse registration order, ``≥ cap`` bytes a
  bucket, a smaller first bucket);
* :mod:`~simulator.ddp.workload` — :class:`Layer`, :class:`Workload`, :func:`mlp_workload`:
  what backward computes, layer by layer;
* :mod:`~simulator.ddp.gloo` — :func:`gloo_ring_all_reduce`, the segmented ring all-reduce
  gloo runs for a dense CPU tensor (``gloo/allreduce.cc``);
* :mod:`~simulator.ddp.cores` — :class:`CoreShare`: backward and communication threads
  sharing one host's cores, by processor sharing or a measured :class:`Interference`;
* :mod:`~simulator.ddp.step` — :func:`ddp_step`, the rank program of one step;
  :func:`predict_step` runs it and reports the step time, the end of backward and the
  *exposed* communication (what the all-reduces add after backward has finished).

Units: seconds, bytes, FLOP, FLOP/s.
"""

from simulator.ddp.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    MiB,
    assign_buckets,
    bucket_caps,
)
from simulator.ddp.cores import CoreShare, Interference
from simulator.ddp.gloo import (
    GLOO_MAX_SEGMENT_BYTES,
    all_reduce_time,
    gloo_ring_all_reduce,
    gloo_segments,
    waited_gloo_all_reduce,
)
from simulator.ddp.step import DDPPrediction, ddp_step, predict_step
from simulator.ddp.workload import Layer, Workload, mlp_workload

__all__ = [
    "DEFAULT_BUCKET_CAP_BYTES",
    "DEFAULT_FIRST_BUCKET_BYTES",
    "GLOO_MAX_SEGMENT_BYTES",
    "CoreShare",
    "DDPPrediction",
    "Interference",
    "Layer",
    "MiB",
    "Workload",
    "all_reduce_time",
    "assign_buckets",
    "bucket_caps",
    "ddp_step",
    "gloo_ring_all_reduce",
    "gloo_segments",
    "mlp_workload",
    "predict_step",
    "waited_gloo_all_reduce",
]
