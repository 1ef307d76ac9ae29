"""The same split run by PyTorch's own pipeline: ``torch.distributed.pipelining``.

PyTorch's built-in (since 2.4) wraps each rank's stage module in a ``PipelineStage`` and
drives it with a schedule object — ``ScheduleGPipe`` or ``Schedule1F1B`` — whose ``step``
splits the batch, runs the micro-batches and accumulates the gradients, like
:class:`backends.pipeline.runtime.Pipeline`. Given the stage modules our ``balance`` cut, it
must produce the same loss and the same gradients; the benchmark times the two side by side.

Its loss convention: ``loss_fn`` returns a micro-batch's mean loss and, with
``scale_grads=True``, the gradients are divided by the number of micro-batches — the
mini-batch mean only when every micro-batch has the same size. Ours weighs micro-batches by
their sizes, so the two agree exactly on batches the micro-batch count divides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device, on_device

BUILTIN_SCHEDULES = ("gpipe", "1f1b")


class BuiltinPipeline:
    """This rank's stage of a ``torch.distributed.pipelining`` pipeline.

    Args:
        module: this rank's stage (one of :func:`backends.pipeline.partition.partition`),
            moved to the rank's device (:func:`backends.device.device`).
        stage: its index; ``stages`` the number of stages (= ranks of ``group``).
        microbatches: micro-batches per step; ``schedule``: ``gpipe`` or ``1f1b``.
        loss_fn: ``loss_fn(output, target)``, a micro-batch's mean loss.
    """

    def __init__(self, module: nn.Module, stage: int, stages: int, microbatches: int,
                 schedule: str = "gpipe",
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 group: Any = None) -> None:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        if not supported(schedule, stages, microbatches):
            raise ValueError(f"torch.distributed.pipelining runs {', '.join(BUILTIN_SCHEDULES)}"
                             f" (1F1B with at least as many micro-batches as stages), got "
                             f"{schedule!r} with {microbatches} micro-batches on {stages} stages")
        self.stage, self.stages = stage, stages
        self.module = on_device(module)
        self._stage = PipelineStage(self.module, stage, stages, device(), group=group)
        cls = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
        self._schedule = cls(self._stage, microbatches, loss_fn=loss_fn or nn.functional.mse_loss,
                             scale_grads=True)

    def step(self, inputs: torch.Tensor | None = None,
             target: torch.Tensor | None = None) -> float | None:
        """One step; returns the mean of the micro-batch losses on the last stage."""
        inputs = inputs.to(device()) if inputs is not None else None
        target = target.to(device()) if target is not None else None
        if self.stage == 0:
            if self.stage == self.stages - 1:
                losses: list[torch.Tensor] = []
                self._schedule.step(inputs, target=target, losses=losses)
                return float(torch.stack(losses).detach().mean())
            self._schedule.step(inputs)
            return None
        if self.stage == self.stages - 1:
            losses = []
            self._schedule.step(target=target, losses=losses)
            return float(torch.stack(losses).detach().mean())
        self._schedule.step()
        return None


def supported(schedule: str, stages: int, microbatches: int) -> bool:
    """Whether PyTorch's built-in runs this schedule (its ``Schedule1F1B`` needs ``m ≥ p``;
    ours does not)."""
    return schedule in BUILTIN_SCHEDULES and (schedule == "gpipe" or microbatches >= stages)


def stage_index(group: Any = None) -> tuple[int, int]:
    """(this rank's stage, number of stages) in ``group``."""
    return dist.get_rank(group), dist.get_world_size(group)
