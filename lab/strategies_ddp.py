"""DistributedDataParallel as a strategy twin (book chapters 5-6): ``ddp``.

DDP hides the gradients' all-reduce behind the backward pass by grouping parameters into
*buckets*: a bucket's all-reduce starts as soon as its last gradient is ready. The bucket size
is the chapter's knob — small buckets start communicating early but pay a latency each, one
big bucket pays one latency but waits for the whole backward — so the twin sweeps it
(``bucket_mb``, MiB) on an MLP of :data:`WIDTHS` — six 1024×1024 ``Linear`` layers, 24 MiB of
float32 parameters, Horovod's model in chapter 7 (three layers fewer than
:data:`lab.ddp.DEFAULT_WIDTHS`, so a quick comparison fits CI), :data:`lab.ddp.DEFAULT_BATCH`
rows a rank. The sweep runs from 1 MiB (every 4 MiB weight in a bucket of its own) to 64 MiB
(the whole model in one bucket).

Per world size, the simulated twin (:func:`lab.ddp.predict_caps`, :mod:`simulator.ddp`) is
built from primitives only — the per-layer profile on one process
(:func:`lab.ddp.profile_layers`), how compute and communication slow each other on the shared
cores (:func:`lab.ddp.interference`) and the calibration entry — in two tiers: **textbook**,
the buckets' ring all-reduces on :func:`simulator.host.factory.textbook_cluster` (α, B, the
shared bus, γ), and **host**, on :func:`lab.ddp.gloo_ring_cluster` (the calibrated host with
its measured effects, as gloo's ring sees it); both with the ranks sharing the host's cores
(:class:`simulator.ddp.CoreShare`, a textbook item). The real twin
(:func:`lab.ddp.measure_caps`) is a training step of our
:class:`backends.ddp.DistributedDataParallel` (forward, backward with overlapped bucket
all-reduces, SGD step), measured in one launch together with PyTorch's DDP at the same cap.
Nothing is fitted to a DDP measurement.

A predicted row adds ``buckets``, ``predicted_no_overlap_s`` and ``exposed_comm_s``
(communication left after backward; both of the host tier where it was predicted); a measured
row adds ``pytorch_median_s`` (PyTorch's DDP measured beside ours) and
``ours_no_overlap_median_s`` (ours with ``overlap=False``). Times in s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import ddp_timeline
from simulator.core.calibration import Calibration
from simulator.host.factory import shown_tier

WIDTHS = (1024,) * 7
"""The MLP: six 1024×1024 ``Linear`` layers (+ ReLU), 24 MiB (as
:data:`lab.horovod_predict.DEFAULT_WIDTHS`)."""


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """Profile and interference once, then every bucket cap in each tier."""
    from lab.ddp import DEFAULT_BATCH, gloo_ring_cluster, interference, predict_caps, profile_layers

    entry = calibration.entry(world, "gloo")
    workload = profile_layers(WIDTHS, DEFAULT_BATCH)
    contention = interference(world)
    caps = [float(cap) for cap in points]
    tiers = {model: predict_caps(entry, workload, world, caps, contention,
                                 gloo_ring_cluster(entry, world, model))
             for model in models}
    chosen = tiers[shown_tier(tiers)]
    return [{"predicted": {model: tiers[model][i][0].step_s for model in models},
             "bytes": workload.param_bytes, "buckets": len(on.buckets),
             "predicted_no_overlap_s": off.step_s, "exposed_comm_s": on.exposed_comm_s}
            for i, (on, off) in enumerate(chosen)]


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Ours, ours without overlap and PyTorch's DDP at every bucket cap, one launch."""
    from lab.ddp import DEFAULT_BATCH, measure_caps
    from lab.models import parameter_count

    by = measure_caps(WIDTHS, DEFAULT_BATCH, world, [float(cap) for cap in points], repeats)
    return [{"median_s": by[("ours", float(cap))]["median_s"],
             "p10_s": by[("ours", float(cap))]["p10_s"],
             "p90_s": by[("ours", float(cap))]["p90_s"], "bytes": 4 * parameter_count(WIDTHS),
             "pytorch_median_s": by[("pytorch", float(cap))]["median_s"],
             "ours_no_overlap_median_s": by[("ours-serial", float(cap))]["median_s"]}
            for cap in points]


TWIN = register(StrategyTwin(
    name="ddp", chapter="5-6", summary="DistributedDataParallel: gradients all-reduced in "
    "buckets, overlapped with the backward pass", parameter="bucket_mb",
    points=(1.0, 4.0, 16.0, 64.0), quick_points=(16.0,), predict=_predict, measure=_measure,
    worlds=(2, 4), quick_worlds=(2,), timeline=ddp_timeline))
