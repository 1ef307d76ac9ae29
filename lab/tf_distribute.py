"""The mirrored strategies on this machine: a training step predicted beside the measured one
(book ch. 17–18).

Both predictions start from primitives measured on **one thread**, with no strategy involved
(:func:`lab.data_parallel.measure_primitives`): the MLP's forward, loss and backward at each
slice size the replicas get, the SGD step, the copy rate and the in-place addition rate.

* ``MirroredStrategy`` (:func:`predict_mirrored`): replica threads working at the speed
  measured for that many threads computing at once (:func:`thread_speed`, a primitive of the
  host: plain threads, no strategy), then the cross-device all-reduce run by one thread, copy
  by copy and add by add (:func:`simulator.tf_distribute.simulate_mirrored`). No message
  crosses the network, so the calibration is not read: the "devices" are this process's
  memory.
* ``MultiWorkerMirroredStrategy`` (:func:`predict_multi_worker`): one worker per process; the
  ring all-reduce between them on the calibrated local cluster
  (:func:`simulator.host.factory.local_cluster`, the collectives' host effects: the strategy
  calls our ring of chapter 2) in tier ``model``
  (:func:`simulator.tf_distribute.simulate_multi_worker`); the workers compute at the speed
  :func:`thread_speed` measures for that many computations at once.

The real steps are :func:`backends.tf_distribute.measure.measure_mirrored` (in this process)
and :func:`~backends.tf_distribute.measure.measure_multi_worker` (one process per worker,
beside our DDP on the same shards). Nothing is fitted to a measurement of either strategy.

Units: seconds, bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends.measure import Timing
from lab.data_parallel import Primitives, measure_primitives, mlp
from lab.models import parameter_count
from simulator.core.calibration import CalibrationEntry
from simulator.tf_distribute import HostRates, StepPrediction, simulate_mirrored
from simulator.tf_distribute import simulate_multi_worker as _simulate_multi_worker

WIDTHS = (512, 2048, 2048, 10)
"""The MLP (5.3 M parameters, 21 MB of float32, as :data:`lab.data_parallel.DEFAULT_WIDTHS`)."""
SMOKE_WIDTHS = (32, 64, 10)
"""A tiny MLP for smoke runs and the notebook's quick mode."""
PRIMITIVE_REPEATS = 5


def param_bytes(widths: Sequence[int]) -> int:
    """The MLP's float32 parameters, bytes (what every all-reduce moves)."""
    return 4 * parameter_count(widths)


def primitives(widths: Sequence[int], batch: int, replicas: int,
               repeats: int = PRIMITIVE_REPEATS) -> Primitives:
    """One-thread primitives at every slice size of ``batch`` over ``replicas``."""
    return measure_primitives(widths, batch, (replicas,), repeats)


def thread_speed(widths: Sequence[int], rows: int, replicas: int,
                 repeats: int = PRIMITIVE_REPEATS) -> float:
    """How fast each of ``replicas`` threads runs the MLP's forward and backward on ``rows``
    rows while all of them do, relative to one thread alone (a primitive: plain threads, no
    strategy; rounds alternate alone and together, medians, one intra-op thread each). On a
    host with spare cores and memory bandwidth it is 1; threads sharing them get less."""
    if replicas == 1 or rows == 0:
        return 1.0
    import statistics
    import threading
    import time

    import torch

    models = [mlp(widths) for _ in range(replicas)]
    x = torch.randn(rows, widths[0])

    def work(model: Any, out: list[float]) -> None:
        start = time.perf_counter()
        torch.autograd.grad(model(x).sum(), list(model.parameters()))
        out.append(time.perf_counter() - start)

    alone: list[float] = []
    together: list[float] = []
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats + 1):
            work(models[0], alone)
            times: list[float] = []
            threads = [threading.Thread(target=work, args=(m, times)) for m in models]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            together.append(statistics.mean(times))
    finally:
        torch.set_num_threads(saved)
    return statistics.median(alone[1:]) / statistics.median(together[1:])


def predict_mirrored(widths: Sequence[int], batch: int, replicas: int,
                     cross_device_ops: str = "ring", prims: Primitives | None = None,
                     speed: float | None = None) -> StepPrediction:
    """The simulated MirroredStrategy step on ``replicas`` CPU replicas of this process;
    ``speed`` is :func:`thread_speed` at the largest slice (measured when ``None``)."""
    from simulator.tf_distribute import replica_rows

    prims = prims or primitives(widths, batch, replicas)
    if speed is None:
        speed = thread_speed(widths, max(replica_rows(batch, replicas)), replicas)
    rates = HostRates(prims.memcpy_Bps, prims.reduce_Bps, float(prims.cores), speed)
    return simulate_mirrored(prims.profile, param_bytes(widths), batch, replicas, rates,
                             cross_device_ops)


def measure_mirrored(widths: Sequence[int], batch: int, replicas: int, repeats: int = 5,
                     cross_device_ops: str = "ring") -> Timing:
    """The real MirroredStrategy step (s; :func:`backends.tf_distribute.measure.
    measure_mirrored` of :func:`lab.data_parallel.mlp`)."""
    from backends.tf_distribute.measure import measure_mirrored as measure

    return measure(mlp, widths, batch, replicas, repeats, cross_device_ops)


def predict_multi_worker(entry: CalibrationEntry, widths: Sequence[int], batch: int,
                         world: int, model: str = "host", prims: Primitives | None = None,
                         speed: float | None = None) -> StepPrediction:
    """The simulated MultiWorkerMirroredStrategy step on ``world`` workers of this host, the
    all-reduce on the calibrated cluster in tier ``model``; ``speed`` as in
    :func:`predict_mirrored` (processes compute at once as threads do)."""
    from simulator.host.factory import local_cluster
    from simulator.tf_distribute import replica_rows

    prims = prims or primitives(widths, batch, world)
    if speed is None:
        speed = thread_speed(widths, max(replica_rows(batch, world)), world)
    return _simulate_multi_worker(local_cluster(entry, world, model), prims.profile,
                                  param_bytes(widths), batch, float(entry.cores), speed)


def measure_multi_worker(widths: Sequence[int], batch: int, world: int, repeats: int = 5
                         ) -> dict[str, dict[str, Any]]:
    """The real MultiWorkerMirroredStrategy step and our DDP's on the same shards, ``world``
    processes: ``{"strategy": timing, "ddp": timing}`` (dicts of :class:`Timing`, s)."""
    from backends.launch import spawn
    from backends.tf_distribute.measure import measure_multi_worker as measure

    return spawn(measure, world, mlp, list(widths), batch, repeats, timeout=120)[0]  # type: ignore[no-any-return]


def compare_mirrored(widths: Sequence[int], batch: int, replicas: Sequence[int],
                     repeats: int = 5, cross_device_ops: str = "ring") -> list[dict[str, Any]]:
    """Predicted and measured MirroredStrategy step per replica count, one row each (s)."""
    rows = []
    for k in replicas:
        predicted = predict_mirrored(widths, batch, k, cross_device_ops)
        measured = measure_mirrored(widths, batch, k, repeats, cross_device_ops)
        rows.append({"replicas": k, "batch": batch, "cross_device_ops": cross_device_ops,
                     "predicted_s": predicted.step_s, "compute_s": predicted.compute_s,
                     "all_reduce_s": predicted.all_reduce_s, "update_s": predicted.update_s,
                     "measured_median_s": measured.median_s,
                     "rel_error": (predicted.step_s - measured.median_s) / measured.median_s})
    return rows
