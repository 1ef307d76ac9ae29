"""One pipeline experiment: :class:`PipelineSetup`, a model, a mini-batch and a schedule.

The model is :func:`backends.pipeline.models.mlp`; the setup also names the number of
stages, micro-batches, the schedule, the checkpoint mode and the balance, and builds the same
model and data on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simulator.pipeline.balance import balance_by_time
from simulator.pipeline.profile import LayerProfile


@dataclass(frozen=True)
class PipelineSetup:
    """One pipeline experiment.

    Attributes:
        layers, width, hidden: the MLP (``layers`` blocks ``width → hidden → width``);
            ``hiddens``, if given, one hidden width per block instead (an uneven model).
        batch: examples per mini-batch; ``microbatches`` splits it.
        stages: pipeline ranks; ``chunks``: model chunks per rank (interleaved only).
        schedule: ``gpipe``, ``1f1b`` or ``interleaved``.
        checkpoint: ``never``, ``except_last`` or ``always``.
        balance: layers per (virtual) stage; ``None``: torchgpipe's balance by time on the
            profile.
        seed: model and data seed.
    """

    layers: int = 8
    width: int = 256
    hidden: int = 1024
    hiddens: tuple[int, ...] | None = None
    batch: int = 64
    stages: int = 2
    microbatches: int = 4
    schedule: str = "gpipe"
    checkpoint: str = "never"
    chunks: int = 1
    balance: tuple[int, ...] | None = None
    seed: int = 0

    @property
    def virtual_stages(self) -> int:
        """Stages of the model: ``stages · chunks``."""
        return self.stages * (self.chunks if self.schedule == "interleaved" else 1)

    def with_balance(self, profile: list[LayerProfile]) -> PipelineSetup:
        """This setup with an explicit balance (by time on ``profile`` if none was given)."""
        if self.balance is not None:
            return self
        return replace(self, balance=tuple(balance_by_time(profile, self.virtual_stages)))

    def build(self) -> tuple[Any, Any, Any]:
        """(model, inputs, targets), the same on every rank."""
        import torch

        from backends.pipeline.models import mlp

        model = mlp(self.layers, self.width, self.hiddens or self.hidden, seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed + 1)
        x = torch.randn(self.batch, self.width, generator=gen)
        t = torch.randn(self.batch, self.width, generator=gen)
        return model, x, t
