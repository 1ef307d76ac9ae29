"""A synchronous pipeline runtime: each rank owns a stage and runs a schedule (GPipe, 1F1B).

The model is an ``nn.Sequential`` cut into stages by a ``balance`` list (torchgpipe,
:mod:`backends.pipeline.partition`); every rank builds the same model and keeps only its own
stage(s). One training step (:meth:`Pipeline.step`):

1. the first stage splits the mini-batch into ``m`` micro-batches
   (:mod:`backends.pipeline.microbatch`), the last stage splits the targets the same way;
2. every rank executes *its* list of actions from the schedule — the very lists the simulator
   times (:mod:`simulator.pipeline.schedules`: ``gpipe``, ``1f1b``, ``interleaved``):

   * ``F(i)`` — wait for micro-batch ``i``'s input from the previous stage, run the stage
     (checkpointed or not, :mod:`backends.pipeline.checkpointing`), send the output on; the
     last stage computes the loss, weighted by the micro-batch's share of the examples;
   * ``B(i)`` — wait for the gradient of that output from the next stage, run autograd's
     backward through the stage, send the input's gradient back;

   the schedule only orders a rank's own actions; the dependencies *between* stages (the
   forward of ``i`` on stage ``k`` needs stage ``k − 1``'s output, its backward needs stage
   ``k + 1``'s gradient) are honoured by waiting on those messages
   (:mod:`backends.pipeline.comm`);
3. parameter gradients accumulate in ``.grad`` over the micro-batches (gradient accumulation,
   GPipe §2.2) and equal the mini-batch gradient; the optimiser steps once, after the flush.

Every F, B, send and receive is a span in the simulator's trace schema
(:mod:`backends.trace`), so the measured timeline can be drawn beside the predicted one, and
the activations saved for backward are counted per rank (:mod:`backends.pipeline.memory`).

Sources: GPipe (Huang et al., NeurIPS 2019); torchgpipe (Kim et al. 2020); PipeDream-Flush /
1F1B (Narayanan et al., ICML 2021); interleaved 1F1B (Narayanan et al., SC 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device, on_device
from backends.pipeline import checkpointing
from backends.pipeline.comm import StageComm, TensorMeta
from backends.pipeline.memory import ActivationCounter
from backends.pipeline.microbatch import loss_weights, split
from backends.pipeline.partition import owned_stages, partition
from backends.trace import Tracer, span
from simulator.pipeline.schedules import SCHEDULES, Action

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def build_schedule(name: str, ranks: int, microbatches: int, chunks: int = 1
                   ) -> list[list[Action]]:
    """Every rank's actions under schedule ``name`` (``gpipe``, ``1f1b``, ``interleaved``)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    if name == "interleaved":
        return SCHEDULES[name](ranks, microbatches, chunks)
    if chunks != 1:
        raise ValueError(f"schedule {name!r} runs one chunk per rank; use 'interleaved' for "
                         f"{chunks} chunks")
    return SCHEDULES[name](ranks, microbatches)


def group_ranks(group: Any) -> list[int]:
    """The global ranks of ``group`` in group-rank order (``None``: the default group)."""
    if group is None:
        return list(range(dist.get_world_size()))
    return [dist.get_global_rank(group, r) for r in range(dist.get_world_size(group))]


class Pipeline:
    """This rank's part of a synchronous pipeline.

    Args:
        model: the whole ``nn.Sequential``, built identically on every rank.
        balance: layers per (virtual) stage; ``len(balance) == ranks · chunks``.
        microbatches: ``m``, micro-batches per mini-batch.
        schedule: ``gpipe``, ``1f1b`` or ``interleaved``.
        chunks: model chunks per rank (interleaved 1F1B only).
        checkpoint: ``always``, ``except_last`` (torchgpipe's default) or ``never``.
        loss_fn: ``loss_fn(output, target)``, the *mean* loss of a micro-batch.
        group: the process group whose ranks form the pipeline, in order.
        tracer: where F/B/send/recv spans go (``None``: untraced).
    """

    def __init__(self, model: nn.Sequential, balance: Sequence[int], microbatches: int,
                 schedule: str = "gpipe", chunks: int = 1, checkpoint: str = "except_last",
                 loss_fn: LossFn | None = None, group: Any = None,
                 tracer: Tracer | None = None) -> None:
        self.ranks = group_ranks(group)
        self.p = len(self.ranks)
        self.rank = self.ranks.index(dist.get_rank())
        self.chunks = chunks
        self.stages = self.p * chunks
        if len(balance) != self.stages:
            raise ValueError(f"balance has {len(balance)} stages but {self.p} ranks × "
                             f"{chunks} chunks make {self.stages}")
        self.m = microbatches
        self.actions = build_schedule(schedule, self.p, microbatches, chunks)[self.rank]
        self.checkpoint_stop = checkpointing.checkpoint_stop(checkpoint, microbatches)
        parts = partition(model, balance)
        self.modules = {k: on_device(parts[k]) for k in owned_stages(self.rank, self.p, chunks)}
        self.loss_fn = loss_fn or nn.functional.mse_loss
        self.tracer = tracer
        self.comm = StageComm(self.ranks, group, self.stages, microbatches, tracer)
        self.counter = ActivationCounter(self.parameters())
        self._in_metas: dict[int, list[TensorMeta]] = {}
        self._full_bytes: dict[tuple[int, int], int] = {}
        self._saved: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def last(self) -> int:
        """The last virtual stage."""
        return self.stages - 1

    def parameters(self) -> list[nn.Parameter]:
        """The parameters of this rank's stages."""
        return [p for k in sorted(self.modules) for p in self.modules[k].parameters()]

    @property
    def peak_activation_bytes(self) -> int:
        """Peak bytes of activations saved for backward on this rank during the last step."""
        return self.counter.peak_bytes

    # ---- once: agree on shapes ---------------------------------------------------------------

    def _setup(self, micro_inputs: list[torch.Tensor] | None) -> None:
        self._in_metas, self._full_bytes = agree_shapes(self.comm, self.modules, micro_inputs)

    # ---- one step ----------------------------------------------------------------------------

    def step(self, inputs: torch.Tensor | None = None,
             target: torch.Tensor | None = None) -> float | None:
        """Forward and backward of one mini-batch; gradients accumulate into ``.grad``.

        ``inputs`` is needed on the rank of the first stage, ``target`` on the rank of the
        last; both are moved to the rank's device (:func:`backends.device.device`). Returns
        the mini-batch's mean loss on the last stage's rank, else ``None``.
        """
        micro_inputs = micro_targets = None
        if 0 in self.modules:
            if inputs is None:
                raise ValueError(f"rank {self.rank} runs the first stage and needs the inputs")
            micro_inputs = split(inputs.to(device()), self.m)
        if self.last in self.modules:
            if target is None:
                raise ValueError(f"rank {self.rank} runs the last stage and needs the target")
            micro_targets = split(target.to(device()), self.m)
            self._weights = loss_weights(target.shape[0], self.m)
        if not self._in_metas:
            self._setup(micro_inputs)
        elif micro_inputs is not None and [TensorMeta.of(x) for x in micro_inputs] != \
                self._in_metas[0]:
            raise ValueError("the mini-batch's shape changed since the first step; the stages "
                             "agreed on shapes once — build a new Pipeline for a new shape")
        for k in self.modules:
            self.comm.post_receives(k)
        self.counter.reset_peak()
        self._loss = 0.0
        for action in self.actions:
            k = action.chunk * self.p + self.rank
            try:
                if action.kind == "F":
                    self._forward(k, action.microbatch, micro_inputs, micro_targets)
                else:
                    self._backward(k, action.microbatch)
            except Exception as exc:
                raise RuntimeError(f"pipeline rank {self.rank} (global rank "
                                   f"{dist.get_rank()}), stage {k}, {action}: "
                                   f"{type(exc).__name__}: {exc}") from exc
        self.comm.finish()
        return self._loss if self.last in self.modules else None

    def _forward(self, k: int, i: int, micro_inputs: list[torch.Tensor] | None,
                 micro_targets: list[torch.Tensor] | None) -> None:
        if k == 0:
            assert micro_inputs is not None
            x = micro_inputs[i]
        else:
            x = self.comm.wait_activation(k, i).detach()
            x.requires_grad_(x.is_floating_point())
        with span(self.tracer, "compute", _label("F", i, k, self.p)):
            with self.counter.count():
                y = checkpointing.run(self.modules[k], x, i < self.checkpoint_stop)
            if k == self.last:
                assert micro_targets is not None
                y = self.loss_fn(y, micro_targets[i]) * self._weights[i]
                self._loss += float(y.detach())
        if k < self.last:
            self.comm.send_activation(k, i, y.detach())
        self._saved[(k, i)] = (x, y)

    def _backward(self, k: int, i: int) -> None:
        x, y = self._saved.pop((k, i))
        grad = None if k == self.last else self.comm.wait_gradient(k, i)
        with span(self.tracer, "compute", _label("B", i, k, self.p)):
            if i < self.checkpoint_stop:  # the recomputed activations live for the backward
                self.counter.transient(self._full_bytes[(k, i)])
            if y.requires_grad:
                torch.autograd.backward(y, grad_tensors=grad)
        del y
        if k > 0 and x.requires_grad:
            self.comm.send_gradient(k, i, x.grad if x.grad is not None else torch.zeros_like(x))


def agree_shapes(comm: StageComm, modules: Mapping[int, nn.Module],
                 micro_inputs: list[torch.Tensor] | None
                 ) -> tuple[dict[int, list[TensorMeta]], dict[tuple[int, int], int]]:
    """Agree on every boundary's shapes, stage after stage, and allocate the fixed buffers.

    Stage 0 knows its micro-batches; every later stage receives its inputs' shapes from the
    stage before, finds its outputs' shapes by a dry run (:func:`_dry_run`) and tells the
    next stage. Returns each owned stage's input shapes per micro-batch, and the activation
    bytes each (stage, micro-batch) saves without checkpointing.
    """
    in_metas: dict[int, list[TensorMeta]] = {}
    full_bytes: dict[tuple[int, int], int] = {}
    last = comm.stages - 1
    for k in sorted(modules):
        if k == 0:
            assert micro_inputs is not None
            inputs = [TensorMeta.of(x) for x in micro_inputs]
        else:
            inputs = comm.recv_meta(k)
        outputs, seen = [], {}
        for i, meta in enumerate(inputs):  # micro-batches have at most two distinct shapes
            if meta not in seen:
                seen[meta] = _dry_run(modules[k], meta, k > 0)
            out, full_bytes[(k, i)] = seen[meta]
            outputs.append(out)
        if k < last:
            comm.send_meta(k, outputs)
        comm.allocate(k, inputs if k else None, outputs if k < last else None)
        in_metas[k] = inputs
    return in_metas, full_bytes


def _label(kind: str, microbatch: int, stage: int, ranks: int) -> str:
    """``F3`` (or ``F3.1`` on chunk 1), as the schedules print actions."""
    chunk = stage // ranks
    return f"{kind}{microbatch}" + (f".{chunk}" if chunk else "")


def _dry_run(module: nn.Module, meta: TensorMeta, requires_grad: bool
             ) -> tuple[TensorMeta, int]:
    """The output shape of ``module`` on an input of ``meta``, and the activation bytes it
    saves for backward — from one forward on zeros that leaves no trace (random state and
    buffers such as BatchNorm's running statistics are restored)."""
    from backends.pipeline.memory import saved_bytes

    buffers = {name: b.clone() for name, b in module.named_buffers()}
    with torch.random.fork_rng(devices=[]):
        x = torch.zeros(meta.shape, dtype=meta.dtype, device=device())
        with torch.no_grad():
            out = module(x)
        nbytes = saved_bytes(module, x, requires_grad)
    with torch.no_grad():
        for name, b in module.named_buffers():
            b.copy_(buffers[name])
    return TensorMeta.of(out), nbytes
