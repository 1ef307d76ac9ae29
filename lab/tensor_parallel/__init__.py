"""Tensor parallelism on this machine: the small GPT's step predicted and measured (ch. 12).

* **profile** (:func:`profile_ops`, :func:`profile_stages`) — a rank's training step (or each
  pipeline stage's pieces) run with every collective replaced by a local stand-in
  (:class:`backends.tensor_parallel.ProfileGroup`): the seconds of compute between
  consecutive collectives, and each collective's kind, group and bytes — a compute profile
  (a primitive), in the order the rank runs it. *How* each piece is timed
  (:class:`Conditions`): on ``min(world, cores)`` processes at once, each stand-in a real
  blocking wait (one tiny ring step among them, :func:`wait_step`) because compute right
  after a thread slept runs much slower on this VM than in a warm loop; each piece at its
  slowest copy (a collective waits for the slowest rank); the mean over the samples (a
  chain costs the sum of the means); and, by default, in the same rounds as the measured
  steps (:func:`measure_rank` with ``profile_copies``), because the host drifts from minute
  to minute;
* **predict** (:func:`predict`) — the simulator replays those ops on every rank of this
  machine's calibrated cluster (:func:`simulator.host.factory.local_cluster`, its latency
  from the waiting primitive :func:`ring_steps`: :func:`waiting_cluster`): compute on a
  :class:`~simulator.core.cores.CorePool` of the host's cores (ranks are processes that
  time-share them), the all-reduces as gloo runs them, each segment a wait of its own
  (:func:`simulator.ddp.waited_gloo_all_reduce`), the all-gathers as gloo runs them too,
  two half-chunk messages per step
  (:func:`simulator.tensor_parallel.waited_gloo_all_gather`), the reduce-scatters as the
  lab's ring (:func:`simulator.collectives.reduce_scatter.ring_reduce_scatter`), each on its
  tensor or data group — the structure of :mod:`simulator.tensor_parallel`'s iteration
  (compute and tensor-group collectives per layer, then the data-parallel gradient
  all-reduce, then the optimizer), with measured compute instead of FLOPs at a GPU's peak;
* **measure** (:func:`measure_rank`) — the real step of
  :class:`backends.tensor_parallel.ParallelGPT` on spawned processes, barrier-aligned
  repeats of a few steps back to back (per step), the slowest rank's time
  (:func:`backends.measure.measure_many`).

Nothing here is fitted to the measured steps.

Where each concept lives (the rank code in :mod:`backends.tensor_parallel`, glue here):

* :mod:`backends.tensor_parallel.point` — :class:`GridPoint`, the ops of a profile (:data:`Op`);
* :mod:`backends.tensor_parallel.profile` — :class:`Conditions`, :class:`Sampler`,
  :func:`profile_ops`, :func:`profile_stages`;
* :mod:`backends.tensor_parallel.measure` — the rank functions of the real side
  (:func:`measure_rank`, :func:`profile_together_rank`, :func:`mlp_speed_rank`,
  :func:`probe_rank`) and the waiting primitive (:func:`ring_steps`, :func:`wait_step`);
* :mod:`~lab.tensor_parallel.predict` — :func:`predict`, :func:`compute_seconds`;
* :mod:`~lab.tensor_parallel.waiting` — :func:`waiting_cluster`, :func:`waiting_view`;
* :mod:`~lab.tensor_parallel.probe` — the probe's ops (:func:`probe_ops`);
* :mod:`~lab.tensor_parallel.mlp_speed` — our MLP against DTensor's, timed
  (:func:`~lab.tensor_parallel.mlp_speed.mlp_speed`).
"""

from backends.tensor_parallel.measure import (
    FRAGMENT_MATMULS,
    WAIT_BYTES,
    WAIT_COUNT,
    fragments,
    measure_rank,
    mlp_speed_rank,
    probe_rank,
    profile_together_rank,
    ring_steps,
    wait_step,
)
from backends.tensor_parallel.point import GridPoint, Op, point_fields
from backends.tensor_parallel.profile import (
    Conditions,
    Sampler,
    StageProfile,
    profile_ops,
    profile_stages,
    sampler,
)
from lab.tensor_parallel.predict import compute_seconds, predict
from lab.tensor_parallel.probe import probe_ops
from lab.tensor_parallel.waiting import waiting_cluster, waiting_view

__all__ = [
    "FRAGMENT_MATMULS", "WAIT_BYTES", "WAIT_COUNT", "Conditions", "GridPoint", "Op", "Sampler",
    "StageProfile", "compute_seconds", "fragments", "measure_rank", "mlp_speed_rank",
    "point_fields", "predict", "probe_ops", "probe_rank", "profile_ops", "profile_stages",
    "profile_together_rank", "ring_steps", "sampler", "wait_step", "waiting_cluster",
    "waiting_view",
]
