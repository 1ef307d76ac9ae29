"""Asynchronous PipeDream measured beside its simulated twin (book ch. 10–11).

:func:`measure_pipedream` streams ``minibatches`` inputs through the real asynchronous runtime
(:class:`backends.pipeline.pipedream.PipeDream`: 1F1B, weight stashing, optional vertical
sync) on one process per stage and returns, per stage, the most weight versions it held, the
plan's count (:func:`simulator.pipeline.schedules.pipedream_async`), the losses and a traced
timeline. :func:`predict_pipedream` times the same model from its one-process profile with
:func:`simulator.pipeline.simulate.simulate_pipeline` (schedule ``pipedream``). Nothing of
the measured run feeds the prediction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.pipeline.profile import LayerProfile
from simulator.pipeline.simulate import PipelineResult, simulate_pipeline


@dataclass(frozen=True)
class PipeDreamSetup:
    """One asynchronous PipeDream run: an MLP of ``layers`` blocks (``width → hidden →
    width``, :func:`backends.pipeline.models.mlp`) cut by ``balance``, ``minibatches`` inputs
    of ``batch`` examples each, SGD with ``lr``."""

    balance: tuple[int, ...] = (2, 2)
    width: int = 64
    hidden: int = 256
    batch: int = 16
    minibatches: int = 8
    lr: float = 0.01
    vertical_sync: bool = False
    seed: int = 0

    @property
    def stages(self) -> int:
        """Pipeline stages, one rank each."""
        return len(self.balance)

    @property
    def layers(self) -> int:
        """Blocks in the model."""
        return sum(self.balance)

    def build(self) -> tuple[Any, list[Any], list[Any]]:
        """(model, inputs, targets): the same on every rank (seeded)."""
        import torch

        from backends.pipeline.models import mlp

        model = mlp(self.layers, self.width, self.hidden, seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed + 1)
        xs = [torch.randn(self.batch, self.width, generator=gen) for _ in range(self.minibatches)]
        ts = [torch.randn(self.batch, self.width, generator=gen) for _ in range(self.minibatches)]
        return model, xs, ts


def pipedream_rank(fields: dict[str, Any]) -> dict[str, Any]:
    """Rank function: a warm-up run, then one traced run from a barrier; this stage's
    versions, losses and spans."""
    import torch.distributed as dist

    from backends.pipeline.pipedream import PipeDream
    from backends.trace import Tracer

    setup = PipeDreamSetup(**{**fields, "balance": tuple(fields["balance"])})
    rank = dist.get_rank()
    for warm_up in (True, False):  # an untraced run first: lazy set-up out of the timeline
        model, xs, ts = setup.build()
        tracer = Tracer(enabled=not warm_up)
        runtime = PipeDream(model, setup.balance, setup.minibatches, setup.lr,
                            setup.vertical_sync, tracer=tracer)
        dist.barrier()  # every stage starts together (processes start at different times)
        losses = runtime.train(xs if rank == 0 else None,
                               ts if rank == setup.stages - 1 else None)
    return {"versions": runtime.max_versions, "planned_versions": runtime.planned_versions,
            "losses": losses, "trace": tracer.gather().to_records()}


def measure_pipedream(setup: PipeDreamSetup, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``setup`` for real on ``setup.stages`` processes.

    Returns ``versions`` and ``planned_versions`` (per stage), ``losses`` (last stage, per
    input) and ``trace`` (every rank's spans, shifted to start at 0).
    """
    from backends.launch import spawn

    if setup.stages < 2:
        raise ValueError("a PipeDream pipeline needs at least 2 stages")
    results = spawn(pipedream_rank, setup.stages, asdict(setup), timeout=timeout)
    return {"versions": [r["versions"] for r in results],
            "planned_versions": [r["planned_versions"] for r in results],
            "losses": results[-1]["losses"],
            "trace": Trace.from_records(results[0]["trace"]).shifted()}


def profile_pipedream(setup: PipeDreamSetup, repeats: int = 10) -> list[LayerProfile]:
    """The model's per-layer profile on ONE process, at one input of ``batch`` examples."""
    import torch

    from backends.pipeline.profiler import profile_layers

    model, xs, _ = setup.build()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the rank processes (OMP_NUM_THREADS=1)
    try:
        return profile_layers(model, xs[0], repeats=repeats)
    finally:
        torch.set_num_threads(threads)


def predict_pipedream(setup: PipeDreamSetup, profile: list[LayerProfile], cluster: Cluster,
                      cores: float) -> PipelineResult:
    """The simulated run of ``setup`` (schedule ``pipedream``) on ``cluster``, whose ranks
    share ``cores`` CPU cores."""
    input_bytes = setup.batch * setup.width * 4
    return simulate_pipeline(cluster, profile, list(setup.balance), setup.minibatches,
                             "pipedream", input_bytes=input_bytes, cores=cores)
