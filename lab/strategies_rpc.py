"""Model parallelism over RPC as a strategy twin (book chapter 13): ``rpc.split``.

An MLP cut into ``stages = world − 1`` runs of whole layers, each on a worker process, driven
by one more process with ``torch.distributed.rpc``: the forward pass a chain of remote calls,
the backward pass distributed autograd's gradient chain, the update a distributed optimizer
(:func:`backends.rpc.train_split`). The world fixes the number of stages; the sweep is the
batch (rows per step) the split model trains on.

Per point, as ``benchmarks/rpc_accuracy.py`` does:

* **predicted** — :func:`lab.rpc.predict_split_step` (:func:`simulator.rpc.simulate_split_step`)
  from each stage's forward, backward and SGD step profiled on ONE process with one thread
  (:func:`lab.rpc.profile_stages`) and the RPC transport's α and bandwidth, fitted to an echo
  sweep on ``world`` processes (:func:`lab.rpc.calibrate_rpc`) — a primitive measured once per
  prediction, never the training it predicts. It does not read the process group's
  calibration file (``calibrated=False``): RPC has a transport of its own. The textbook and
  host tiers give the same prediction: the RPC cluster (:func:`lab.rpc.rpc_cluster`) is
  already the textbook's α-β model of that transport — one fitted link per pair, no shared
  bus — and the calibration's host effects are the process group's, not RPC's;
* **measured** — :func:`lab.rpc.measure_split_step`: real training steps on ``world``
  processes, median, p10 and p90.

Seconds; ``bytes`` is the model's float32 parameters; a predicted row adds ``stages`` and the
fit's ``rpc_alpha_s`` (s) and ``rpc_bandwidth_Bps`` (bytes/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import rpc_timeline
from simulator.core.calibration import Calibration

WIDTHS = (256, 1024, 1024, 256)
"""The MLP (three linear layers, 1.6 M parameters: the benchmark's "wide" model); up to three
stages, so up to four processes."""


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """Calibration-file-free: the RPC echo fit is measured here, at ``world`` processes, once;
    then each batch's stages are profiled on this process."""
    from lab.models import parameter_count
    from lab.rpc import calibrate_rpc, predict_split_step, profile_stages

    stages = world - 1
    fit = calibrate_rpc(world=world)
    rows = []
    for batch in points:
        seconds = predict_split_step(profile_stages(WIDTHS, stages, batch), fit)
        rows.append({"predicted": {model: seconds for model in models},
                     "bytes": 4 * parameter_count(WIDTHS), "stages": stages,
                     "rpc_alpha_s": fit.alpha_s, "rpc_bandwidth_Bps": fit.bandwidth_Bps})
    return rows


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Real training steps of the split model at each batch."""
    from lab.models import parameter_count
    from lab.rpc import measure_split_step

    return [{**measure_split_step(WIDTHS, world - 1, batch, repeats),
             "bytes": 4 * parameter_count(WIDTHS), "stages": world - 1} for batch in points]


TWIN = register(StrategyTwin(
    name="rpc.split", chapter="13", summary="RPC model parallelism: an MLP split into "
    "world − 1 stages on workers, driven by remote calls and distributed autograd",
    parameter="batch", points=(32, 128, 512), quick_points=(32,), predict=_predict,
    measure=_measure, worlds=(2, 3, 4), quick_worlds=(2,), calibrated=False,
    timeline=rpc_timeline))
