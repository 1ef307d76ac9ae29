"""PyTorch's own zero-bubble schedules, for comparison: ``torch.distributed.pipelining``.

``ScheduleInterleavedZeroBubble`` (with one stage per rank: ZB-H1), ``ScheduleZBVZeroBubble``
(ZB-V) and ``ScheduleDualPipeV`` run a ``PipelineStage`` per stage and split the backward
themselves. :class:`BuiltinZeroBubble` drives them on our partition, and
:func:`pytorch_order` reads the order of actions each one plans — its ``pipeline_order`` —
as our :class:`~simulator.pipeline.schedules.action.Action` lists, for the action-by-action
comparison with :mod:`simulator.pipeline.schedules.zero_bubble`.

The mapping: PyTorch's ``_Action(stage_index, computation_type, microbatch_index)`` with
``F``/``I``/``W``/``B`` becomes our ``Action(kind, microbatch, chunk)`` with the chunk of that
stage on its rank; an idle slot (``None``) is dropped — our lists order a rank's work, the
waiting is the runtime's; DualPipe-V's ``OVERLAP_F_B`` (a forward and a backward issued
together, to overlap one's communication with the other's compute on a GPU) becomes its two
sub-actions in order, as its runtime runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from backends.device import device, on_device
from simulator.pipeline.schedules.action import Action, Schedule
from simulator.pipeline.schedules.split_backward import stage_of

BUILTIN = {"zb_h1": "ScheduleInterleavedZeroBubble", "zbv": "ScheduleZBVZeroBubble",
           "dualpipev": "ScheduleDualPipeV"}
"""Our schedule name → PyTorch's schedule class."""


def supported(schedule: str, ranks: int, microbatches: int) -> bool:
    """Whether PyTorch defines ``schedule`` at this size: its ZB-H1 runs micro-batches in rounds
    of ``max(1, m // p)`` that must divide ``m``; its DualPipe-V needs ``m ≥ 2p``."""
    if schedule == "zb_h1":
        return microbatches % max(1, microbatches // ranks) == 0
    if schedule == "dualpipev":
        return microbatches >= 2 * ranks
    return schedule == "zbv"


def pytorch_order(schedule: str, ranks: int, microbatches: int) -> Schedule:
    """PyTorch's planned order of compute actions for ``schedule``, as our action lists.

    The planners are methods that read a few attributes of the schedule object; they are
    called on a stand-in carrying only those, so no process group is needed.
    """
    from torch.distributed.pipelining import schedules as pt

    if not supported(schedule, ranks, microbatches):
        raise ValueError(f"PyTorch does not define {schedule} for {ranks} ranks and "
                         f"{microbatches} micro-batches")
    cls = getattr(pt, BUILTIN[schedule])
    rounds = max(1, microbatches // ranks)
    plan = SimpleNamespace(pp_group_size=ranks, _n_microbatches=microbatches,
                           n_local_stages=1, microbatches_per_round=microbatches // rounds,
                           num_stages=2 * ranks)
    plan.pipeline_order = {r: cls._calculate_single_rank_operations(plan, r)
                           for r in range(ranks)}
    if schedule == "zb_h1":
        plan.pipeline_order = cls._add_bubbles_to_actions(plan, ranks)
    placement = "loop" if schedule == "zb_h1" else "v"
    chunk_of = {stage_of(r, c, ranks, placement): c
                for r in range(ranks) for c in range(1 if schedule == "zb_h1" else 2)}
    out: Schedule = []
    for r in range(ranks):
        actions = []
        for a in plan.pipeline_order[r]:
            for sub in (() if a is None else a.sub_actions or (a,)):
                actions.append(Action(sub.computation_type.value, sub.microbatch_index,
                                      chunk_of[sub.stage_index]))
        out.append(actions)
    return out


class BuiltinZeroBubble:
    """This rank's stages under one of PyTorch's zero-bubble schedules.

    Args:
        parts: every stage of the partition (this rank keeps its own).
        rank / ranks: this rank's index in ``group`` and the group's size.
        microbatches: ``m``; ``schedule``: ``zb_h1``, ``zbv`` or ``dualpipev``.
        loss_fn: a micro-batch's mean loss; gradients are scaled by ``1/m`` (the mini-batch
            mean when ``m`` divides the batch).
    """

    def __init__(self, parts: list[nn.Sequential], rank: int, ranks: int, microbatches: int,
                 schedule: str,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 group: Any = None) -> None:
        from torch.distributed import pipelining
        from torch.distributed.pipelining import PipelineStage

        if not supported(schedule, ranks, microbatches):
            raise ValueError(f"PyTorch does not define {schedule} for {ranks} ranks and "
                             f"{microbatches} micro-batches")
        placement = "loop" if schedule == "zb_h1" else "v"
        chunks = 1 if schedule == "zb_h1" else 2
        self.own = [stage_of(rank, c, ranks, placement) for c in range(chunks)]
        self.modules = {k: on_device(parts[k]) for k in self.own}
        self.first, self.last = 0 in self.own, len(parts) - 1 in self.own
        stages = [PipelineStage(self.modules[k], k, len(parts), device(), group=group)
                  for k in self.own]
        cls = getattr(pipelining, BUILTIN[schedule])
        self._schedule = cls(stages, microbatches, loss_fn=loss_fn or nn.functional.mse_loss,
                             scale_grads=True)

    def parameters(self) -> list[nn.Parameter]:
        return [p for k in sorted(self.modules) for p in self.modules[k].parameters()]

    def step(self, inputs: torch.Tensor | None = None,
             target: torch.Tensor | None = None) -> float | None:
        """One step; the mean of the micro-batch losses on the last stage's rank."""
        args = (inputs.to(device()),) if self.first and inputs is not None else ()
        if self.last:
            losses: list[torch.Tensor] = []
            self._schedule.step(*args, target=target.to(device()) if target is not None
                                else None, losses=losses)
            return float(torch.stack(losses).detach().mean())
        self._schedule.step(*args)
        return None
