"""The rank program that runs asynchronous PipeDream on real processes (book ch. 10–11).

:class:`PipeDreamSetup` names one run: an MLP cut into stages, the inputs streamed through
it, the optimizer. :func:`pipedream_rank` runs it on one process per stage with
:class:`backends.pipeline.pipedream.PipeDream` (1F1B, weight stashing, optional vertical
sync) and returns what the chapter compares with the plan
(:func:`simulator.pipeline.schedules.pipedream_async`): the most weight versions the stage
held, the planned count, the losses and one traced run's spans (timed in seconds).

torch is imported inside the functions, so that a setup can be named (and its run predicted,
:mod:`lab.pipedream`) without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    """Rank function: a warm-up run of the :class:`PipeDreamSetup` with ``fields``, then one
    traced run from a barrier; this stage's versions, losses and spans."""
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
