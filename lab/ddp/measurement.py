"""The real side: DDP steps of the lab's MLP measured on real processes.

The rank code lives in :mod:`backends.ddp_measure`; these are its lab entries, with the lab's
MLP (:func:`lab.ddp.profiling.build_mlp`) as the model:

* :func:`measure_steps` — rank function: ``backends.ddp.DistributedDataParallel`` and
  ``torch.nn.parallel.DistributedDataParallel`` at each bucket cap, repeats interleaved
  (:func:`backends.measure.measure_many`), one training step per call;
* :func:`measured_timeline` — rank function: one traced step of ours (forward, backward,
  optimizer spans and, per bucket, ``ready`` and ``allreduce`` spans); :func:`timeline`
  launches it.

Units: seconds; bucket caps in MiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends import ddp_measure
from lab.ddp.profiling import build_mlp
from simulator.core.engine import Trace


def measure_steps(widths: Sequence[int], batch: int, caps: Sequence[float | None],
                  repeats: int = 10, which: Sequence[str] = ("ours", "pytorch", "ours-serial")
                  ) -> list[dict[str, Any]]:
    """Rank function: step time of each DDP at each bucket cap, repeats interleaved
    (``ours-serial``: ours with ``overlap=False``; :func:`backends.ddp_measure.measure_steps`)."""
    return ddp_measure.measure_steps(build_mlp, widths, batch, caps, repeats, which)


def measured_timeline(widths: Sequence[int], batch: int, bucket_cap_mb: float | None,
                      steps: int = 3) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps of our DDP, every rank
    (:func:`backends.ddp_measure.measured_timeline`)."""
    return ddp_measure.measured_timeline(build_mlp, widths, batch, bucket_cap_mb, steps)


def timeline(world: int, widths: Sequence[int], batch: int,
             bucket_cap_mb: float | None) -> Trace:
    """One measured step of our DDP on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(ddp_measure.measured_timeline, world, build_mlp, list(widths), batch,
                    bucket_cap_mb)[0]
    return Trace.from_records(records).shifted()
