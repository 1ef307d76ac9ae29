"""Glue for the zero-bubble twins (book chapter 23): a setup, its profile, prediction, measure.

:class:`ZeroBubbleSetup` names the experiment — an MLP of feed-forward blocks
(:func:`backends.pipeline.models.mlp`) cut into equal-as-possible stages (``p`` for ZB-H1,
``2p`` for ZB-V and DualPipe-V), a mini-batch split into micro-batches, a schedule.

* :func:`profile` — each stage's ``F``, ``I`` and ``W`` timed on one process
  (:func:`backends.pipeline.zero_bubble_measure.stage_costs`), nothing of the pipeline, in
  one copy per rank the host's cores run at once;
* :func:`predict` — those costs on the simulated twin
  (:func:`simulator.pipeline.zero_bubble.simulate_zero_bubble`) on this machine's calibrated
  cluster in a tier (:func:`lab.pipeline.local_cluster`), the ranks sharing the host's cores;
* :func:`measure` — the real twin on ``stages`` processes
  (:func:`backends.pipeline.zero_bubble_measure.measure_rank`): the slowest rank's step,
  each rank's peak activation bytes, and PyTorch's schedule timed beside it.

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from lab.pipeline import host_cores, local_cluster
from simulator.core.calibration import Calibration
from simulator.pipeline.zero_bubble import SplitStageCost, ZeroBubbleResult, simulate_zero_bubble

SCHEDULES = ("zb_h1", "zbv", "dualpipev")


def even_balance(layers: int, stages: int) -> tuple[int, ...]:
    """``layers`` cut into ``stages`` consecutive stages as evenly as possible (the larger
    first)."""
    if stages > layers:
        raise ValueError(f"{layers} layers cannot fill {stages} stages")
    q, r = divmod(layers, stages)
    return tuple(q + (k < r) for k in range(stages))


@dataclass(frozen=True)
class ZeroBubbleSetup:
    """One zero-bubble experiment.

    Attributes:
        stages: pipeline ranks ``p``; ``microbatches``: ``m``; ``schedule``: ``zb_h1``,
            ``zbv`` or ``dualpipev``.
        layers, width, hidden: the MLP (``layers`` blocks ``width → hidden → width``).
        batch: examples per mini-batch; ``seed``: model and data seed.
    """

    stages: int = 2
    microbatches: int = 8
    schedule: str = "zb_h1"
    layers: int = 8
    width: int = 256
    hidden: int = 1024
    batch: int = 64
    seed: int = 0

    @property
    def chunks(self) -> int:
        """Stages per rank: 1 for ZB-H1, 2 for the V schedules."""
        return 1 if self.schedule == "zb_h1" else 2

    @property
    def balance(self) -> tuple[int, ...]:
        """Layers per stage, in stage order."""
        return even_balance(self.layers, self.stages * self.chunks)

    def check(self) -> None:
        """Raise ``ValueError`` with a one-line reason for a setup the schedule cannot run."""
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of "
                             f"{', '.join(SCHEDULES)}")
        if self.stages * self.chunks > self.layers:
            raise ValueError(f"{self.schedule} at {self.stages} ranks needs "
                             f"{self.stages * self.chunks} stages; the model has "
                             f"{self.layers} blocks")
        if self.schedule == "dualpipev" and self.microbatches < 2 * self.stages:
            raise ValueError(f"dualpipev at {self.stages} ranks needs at least "
                             f"{2 * self.stages} micro-batches, got {self.microbatches}")
        if self.microbatches > self.batch:
            raise ValueError(f"{self.microbatches} micro-batches of a {self.batch}-example "
                             "mini-batch leave some empty")

    def build(self) -> tuple[Any, Any, Any]:
        """(model, inputs, targets), the same on every rank."""
        import torch

        from backends.pipeline.models import mlp

        model = mlp(self.layers, self.width, self.hidden, seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed + 1)
        x = torch.randn(self.batch, self.width, generator=gen)
        t = torch.randn(self.batch, self.width, generator=gen)
        return model, x, t


def profile(setup: ZeroBubbleSetup, repeats: int = 10, colocated: bool = True
            ) -> list[SplitStageCost]:
    """Each stage's costs of one micro-batch, measured on one process — with ``colocated``,
    in ``min(p, cores)`` copies at once (one per rank the host can run together, so the
    copies share caches and memory bandwidth as the ranks do, never a core), the median over
    the copies. Core sharing beyond that is the simulator's (``cores``)."""
    from backends.launch import spawn
    from backends.pipeline.zero_bubble_measure import stage_costs, stage_costs_rank

    copies = min(setup.stages, host_cores()) if colocated else 1
    runs = (spawn(stage_costs_rank, copies, setup, repeats) if copies > 1
            else [stage_costs(setup, repeats)])
    costs = []
    for stage in zip(*runs, strict=True):
        med = {key: statistics.median(c[key] for c in stage) for key in stage[0]}
        costs.append(SplitStageCost(med["forward_s"], med["input_s"], med["weight_s"],
                                    int(stage[0]["activation_bytes"]),
                                    int(stage[0]["output_bytes"])))
    return costs


def predict(setup: ZeroBubbleSetup, costs: list[SplitStageCost],
            calibration: Calibration | None = None, model: str = "host",
            cores: float | None = None) -> ZeroBubbleResult:
    """The simulated step of ``setup`` in tier ``model`` (``host`` or ``textbook``), the
    ranks sharing ``cores`` CPU cores (default: this host's)."""
    cluster, _ = local_cluster(setup.stages, calibration, model=model)
    return simulate_zero_bubble(cluster, costs, setup.microbatches, setup.schedule,
                                cores=host_cores() if cores is None else cores)


def measure(setup: ZeroBubbleSetup, repeats: int = 10, builtin: bool = True,
            timeout: float = 120.0) -> dict[str, Any]:
    """Run ``setup`` on ``setup.stages`` processes: rank 0's timings (every rank's step ends
    at the same flush), every rank's measured and predicted peak activation bytes, and the
    bubble of one traced step — ``1 − Σ compute / (p · slowest rank's step)``, the definition
    the simulated twin uses."""
    from backends.launch import spawn
    from backends.pipeline.zero_bubble_measure import measure_rank

    per_rank = spawn(measure_rank, setup.stages, setup, repeats, builtin, timeout=timeout)
    head = per_rank[0]
    return {"timing": head["timing"], "builtin": head["builtin"],
            "peak_activation_bytes": [r["peak_activation_bytes"] for r in per_rank],
            "predicted_peak_activation_bytes": [r["predicted_peak_activation_bytes"]
                                                for r in per_rank],
            "loss": next(r["loss"] for r in per_rank if r["loss"] is not None),
            "bubble": 1 - sum(r["busy_s"] for r in per_rank)
            / (len(per_rank) * max(r["step_s"] for r in per_rank))}
