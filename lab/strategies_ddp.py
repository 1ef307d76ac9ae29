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

Per world size, the simulated twin is built from primitives only — the per-layer profile on
one process (:func:`lab.ddp.profile_layers`), how compute and communication slow each other on
the shared cores (:func:`lab.ddp.interference`) and the calibration entry — and
:func:`lab.ddp.sweep` puts its prediction (:func:`lab.ddp.predict`, :mod:`simulator.ddp`)
beside the real twin, a training step of our :class:`backends.ddp.DistributedDataParallel`
(forward, backward with overlapped bucket all-reduces, SGD step), measured in one launch
together with PyTorch's DDP at the same cap. Nothing is fitted to a DDP measurement.

Each row adds ``buckets`` (predicted), ``predicted_no_overlap_s`` and ``exposed_comm_s``
(communication left after backward, predicted), ``pytorch_median_s`` (PyTorch's DDP measured
beside ours) and ``ours_no_overlap_median_s`` (ours with ``overlap=False``). Times in s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

WIDTHS = (1024,) * 7
"""The MLP: six 1024×1024 ``Linear`` layers (+ ReLU), 24 MiB (as
:data:`lab.horovod_predict.DEFAULT_WIDTHS`)."""


def _compare(world: int, points: Sequence[Any], repeats: int,
             calibration: str | Path | None) -> list[dict[str, Any]]:
    """Profile and interference once per world, then every bucket cap in one launch."""
    from lab.ddp import DEFAULT_BATCH, interference, profile_layers, sweep
    from simulator.core.calibration import find_entry

    entry = find_entry(world, "gloo", path=calibration)
    workload = profile_layers(WIDTHS, DEFAULT_BATCH)
    contention = interference(world)
    points_ = sweep(entry, workload, WIDTHS, world, [float(cap) for cap in points],
                    repeats, contention)
    return [row(TWIN, world, cap, p.predicted_s,
                {"median_s": p.ours_median_s, "p10_s": p.ours_p10_s, "p90_s": p.ours_p90_s},
                nbytes=workload.param_bytes, buckets=p.buckets,
                predicted_no_overlap_s=p.predicted_no_overlap_s,
                exposed_comm_s=p.exposed_comm_s, pytorch_median_s=p.pytorch_median_s,
                ours_no_overlap_median_s=p.ours_no_overlap_median_s)
            for cap, p in zip(points, points_, strict=True)]


TWIN = register(StrategyTwin(
    name="ddp", chapter="5-6", summary="DistributedDataParallel: gradients all-reduced in "
    "buckets, overlapped with the backward pass", parameter="bucket_mb",
    points=(1.0, 4.0, 16.0, 64.0), quick_points=(16.0,), compare=_compare, worlds=(2, 4),
    quick_worlds=(2,)))
