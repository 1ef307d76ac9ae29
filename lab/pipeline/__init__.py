"""A pipeline step measured and predicted, side by side (book ch. 8–11).

:class:`PipelineSetup` (:mod:`~lab.pipeline.experiment`) names one experiment: a model
(:func:`backends.pipeline.models.mlp`), a mini-batch, the number of stages, micro-batches,
schedule and checkpoint mode. Then

* :func:`profile` (:mod:`~lab.pipeline.profiling`) measures the model's per-layer costs on
  ONE process (:func:`backends.pipeline.profiler.profile_layers`) at the micro-batch size;
  :mod:`~lab.pipeline.stages` times each stage as the runtime runs it
  (:func:`profile_stages`, :func:`profile_stages_together`, with the probes of
  :mod:`backends.pipeline.measure`);
* :func:`predict` (:mod:`~lab.pipeline.prediction`) hands that profile to the simulated twin
  (:func:`simulator.pipeline.simulate.simulate_pipeline`) on this machine's calibrated
  cluster (:func:`local_cluster`: :func:`simulator.host.factory.local_cluster`), with the
  host's CPU cores shared by the stage processes (``cores``) — on a 2-core laptop, 3 or 4
  stages computing at once get ``2/3`` or ``1/2`` of a core each;
* :func:`measure` (:mod:`~lab.pipeline.measurement`) runs the real twin
  (:class:`backends.pipeline.runtime.Pipeline`) on real processes (the rank programs of
  :mod:`backends.pipeline.measure`), times steps (median, p10/p90 of the slowest rank),
  records one traced step and the peak activation bytes per stage — and, for GPipe and 1F1B,
  times ``torch.distributed.pipelining`` on the same split, interleaved in the same rounds;
* :func:`side_by_side` (:mod:`~lab.pipeline.comparison`) does all three and computes the
  relative errors;
* :mod:`~lab.pipeline.host_load` — the host's cores and how busy other programs keep them.

Nothing of the measured pipeline feeds the prediction: only the one-process profile and the
calibrated primitives do.
"""

from lab.pipeline.comparison import record, side_by_side
from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_busy_s, host_cores, quietly
from lab.pipeline.measurement import measure, measure_sweep
from lab.pipeline.prediction import local_cluster, predict
from lab.pipeline.profiling import profile, profile_colocated, profile_quietly, profile_rank
from lab.pipeline.stages import profile_stages, profile_stages_together, stage_profile

__all__ = [
    "PipelineSetup",
    "host_busy_s",
    "host_cores",
    "local_cluster",
    "measure",
    "measure_sweep",
    "predict",
    "profile",
    "profile_colocated",
    "profile_quietly",
    "profile_rank",
    "profile_stages",
    "profile_stages_together",
    "quietly",
    "record",
    "side_by_side",
    "stage_profile",
]
