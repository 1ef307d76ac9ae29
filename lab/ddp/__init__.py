"""DDP in the lab: one MLP, predicted by :mod:`simulator.ddp` and measured with both real DDPs.

Read in this order:

* :mod:`~lab.ddp.profiling` — :func:`profile_layers`, the per-layer compute profile,
  measured on **one** process (a primitive: forward and backward of each ``Linear`` + ReLU
  alone, median of repeats, one thread), turned into a :class:`simulator.ddp.Workload`;
* :mod:`~lab.ddp.contention` — :func:`interference`, compute and communication speeds while
  both run on the shared cores (a primitive on every rank at once);
* :mod:`~lab.ddp.prediction` — :func:`predict`, the simulated step on this machine's
  calibrated local cluster (``cluster_from_entry``), with the host's cores shared by every
  rank's backward and communication threads (:class:`simulator.ddp.CoreShare`);
* :mod:`~lab.ddp.measurement` — :func:`measure_steps`, rank function:
  ``backends.ddp.DistributedDataParallel`` and ``torch.nn.parallel.DistributedDataParallel``
  at each bucket cap, repeats interleaved (:func:`backends.measure.measure_many`), one
  training step per call; :func:`measured_timeline`, rank function: one traced step of ours
  (forward, backward, optimizer spans and, per bucket, ``ready`` and ``allreduce`` spans);
* :mod:`~lab.ddp.comparison` — :func:`predict_caps` and :func:`measure_caps` at every bucket
  cap, and :func:`sweep`: both side by side;
* :mod:`~lab.ddp.demos` — the pictures and demonstrations of notebook 05.

Nothing here is fitted to a DDP measurement: the prediction uses the profile (one process),
the calibration (ping-pong, exchanges, reduction, copy) and the core count only.
"""

from lab.ddp.comparison import Point, caps_mb, measure_caps, predict_caps, sweep
from lab.ddp.contention import COMM_SEGMENT_BYTES, interference, overlap_interference
from lab.ddp.demos import LANE_COLOURS, plot_step, train_uneven
from lab.ddp.measurement import measure_steps, measured_timeline, timeline
from lab.ddp.prediction import gloo_ring_cluster, predict, ring_view
from lab.ddp.profiling import (
    DEFAULT_BATCH,
    DEFAULT_WIDTHS,
    SMOKE_WIDTHS,
    build_mlp,
    profile_layers,
)

__all__ = [
    "COMM_SEGMENT_BYTES",
    "DEFAULT_BATCH",
    "DEFAULT_WIDTHS",
    "LANE_COLOURS",
    "SMOKE_WIDTHS",
    "Point",
    "build_mlp",
    "caps_mb",
    "gloo_ring_cluster",
    "interference",
    "measure_caps",
    "measure_steps",
    "measured_timeline",
    "overlap_interference",
    "plot_step",
    "predict",
    "predict_caps",
    "profile_layers",
    "ring_view",
    "sweep",
    "timeline",
    "train_uneven",
]
