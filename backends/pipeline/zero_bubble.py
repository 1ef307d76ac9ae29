"""A zero-bubble pipeline runtime: the backward split into I and W (book chapter 23).

Twin of :mod:`simulator.pipeline.zero_bubble`. It runs the action lists of
:mod:`simulator.pipeline.schedules.zero_bubble` (ZB-H1, ZB-V, DualPipe-V) on real processes,
as :class:`backends.pipeline.runtime.Pipeline` runs GPipe and 1F1B, with two more kinds:

* ``I(i)`` — the *input* gradient (Qi et al. 2024, §2): autograd from the stage's output
  (or loss) back to the stage's input and to the output of every layer that owns weights,
  keeping the graph; the input gradient is sent to the previous stage at once;
* ``W(i)`` — the *weight* gradient: for each such layer, autograd from its output to its own
  parameters only, with the output gradient ``I`` left behind — the one matrix product per
  layer that nobody downstream waits for. Then the micro-batch's graph (and its saved
  activations) is dropped;
* ``B(i)`` — both, back to back (DualPipe-V's fused backward).

Placement: ZB-H1 puts stage ``r`` on rank ``r``; the V schedules put stages ``r`` and
``2p − 1 − r`` on rank ``r`` (:func:`simulator.pipeline.schedules.split_backward.stage_of`),
so stages ``p − 1`` and ``p`` share the last rank: that hand-off stays in the process (a copy,
as a received buffer would be). Other messages go through :class:`VStageComm`, the runtime's
:class:`~backends.pipeline.comm.StageComm` with the placement's peers.

Shapes are agreed without messages: every rank builds the same model and the same example
mini-batch, so each one dry-runs the stages in order and knows every boundary's shape.
Gradients accumulate in ``.grad`` over the micro-batches, weighted by micro-batch size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device, on_device
from backends.pipeline.comm import StageComm, TensorMeta
from backends.pipeline.memory import ActivationCounter, saved_bytes
from backends.pipeline.microbatch import loss_weights, split
from backends.pipeline.partition import partition
from backends.pipeline.runtime import group_ranks
from backends.trace import Tracer, span
from simulator.pipeline.schedules.split_backward import stage_of
from simulator.pipeline.schedules.zero_bubble import ZERO_BUBBLE

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def stages_per_rank(schedule: str) -> int:
    """Model chunks per rank of a zero-bubble schedule (1 for ZB-H1, 2 for the V ones)."""
    if schedule not in ZERO_BUBBLE:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of "
                         f"{', '.join(ZERO_BUBBLE)}")
    return 2 if ZERO_BUBBLE[schedule][1] == "v" else 1


class VStageComm(StageComm):
    """:class:`~backends.pipeline.comm.StageComm` whose peers follow a placement."""

    def __init__(self, ranks: Sequence[int], group: Any, stages: int, microbatches: int,
                 placement: str, tracer: Tracer | None = None) -> None:
        super().__init__(ranks, group, stages, microbatches, tracer)
        self.placement = placement
        p, chunks = len(self.ranks), stages // len(self.ranks)
        self.owner = {stage_of(r, c, p, placement): r for r in range(p) for c in range(chunks)}

    def peer(self, stage: int) -> int:
        """The global rank that runs ``stage``."""
        return self.ranks[self.owner[stage]]


def weight_layers(module: nn.Module) -> list[nn.Module]:
    """The sub-modules that own parameters directly: where ``W`` computes gradients."""
    return [m for m in module.modules() if any(True for _ in m.parameters(recurse=False))]


def forward_capturing(module: nn.Module, layers: list[nn.Module], x: torch.Tensor
                      ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``F``: ``module(x)``, and the output of each of ``layers`` (its weight layers) in the
    order they ran — the tensors ``I`` differentiates to and ``W`` starts from."""
    outs: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda _m, _i, o: outs.append(o)) for layer in layers]
    try:
        return module(x), outs
    finally:
        for hook in hooks:
            hook.remove()


def backward_input(y: torch.Tensor, grad: torch.Tensor | None, x: torch.Tensor,
                   outs: list[torch.Tensor]) -> tuple[torch.Tensor | None, list[Any]]:
    """``I``: the gradients of the stage input ``x`` (``None`` unless it requires grad) and of
    each weight layer's output in ``outs``, from ``y``'s gradient; the graph is kept."""
    wanted = ([x] if x.requires_grad else []) + outs
    grads = torch.autograd.grad(y, wanted, grad_outputs=grad, retain_graph=True,
                                allow_unused=True)
    if x.requires_grad:
        return grads[0], list(grads[1:])
    return None, list(grads)


def backward_weight(layers: list[nn.Module], outs: list[torch.Tensor],
                    grads: list[Any]) -> None:
    """``W``: each layer's parameter gradients from its output's gradient, accumulated into
    ``.grad``; autograd goes through that layer's own operation only."""
    for layer, out, g in zip(layers, outs, grads, strict=True):
        if g is not None:
            torch.autograd.backward(out, g, inputs=list(layer.parameters(recurse=False)))


class ZeroBubblePipeline:
    """This rank's part of a zero-bubble pipeline.

    Args:
        model: the whole ``nn.Sequential``, built identically on every rank.
        balance: layers per stage (``p`` for ZB-H1, ``2p`` for ``zbv``/``dualpipev``).
        microbatches: ``m``.
        schedule: ``zb_h1``, ``zbv`` or ``dualpipev``.
        example: a mini-batch of inputs, the same on every rank (shapes are agreed from it).
        loss_fn: the mean loss of a micro-batch (default MSE).
        group: the process group of the pipeline's ranks, in order.
        tracer: where compute/send/recv spans go.
    """

    def __init__(self, model: nn.Sequential, balance: Sequence[int], microbatches: int,
                 schedule: str, example: torch.Tensor, loss_fn: LossFn | None = None,
                 group: Any = None, tracer: Tracer | None = None) -> None:
        self.ranks = group_ranks(group)
        self.p = len(self.ranks)
        self.rank = self.ranks.index(dist.get_rank())
        chunks = stages_per_rank(schedule)
        make, self.placement = ZERO_BUBBLE[schedule]
        self.stages = self.p * chunks
        if len(balance) != self.stages:
            raise ValueError(f"{schedule} on {self.p} ranks has {self.stages} stages; balance "
                             f"has {len(balance)}")
        self.m = microbatches
        self.actions = make(self.p, microbatches)[self.rank]
        parts = partition(model, balance)
        self.own = [stage_of(self.rank, c, self.p, self.placement) for c in range(chunks)]
        self.modules = {k: on_device(parts[k]) for k in self.own}
        self.layers = {k: weight_layers(self.modules[k]) for k in self.own}
        self.loss_fn = loss_fn or nn.functional.mse_loss
        self.tracer = tracer
        self.comm = VStageComm(self.ranks, group, self.stages, microbatches, self.placement,
                               tracer)
        self.counter = ActivationCounter(self.parameters())
        self.activation_bytes = self._agree_shapes(parts, example)
        self._saved: dict[tuple[int, int], Any] = {}
        self._local: dict[tuple[int, int, str], torch.Tensor] = {}

    @property
    def last(self) -> int:
        return self.stages - 1

    def parameters(self) -> list[nn.Parameter]:
        """The parameters of this rank's stages."""
        return [p for k in sorted(self.modules) for p in self.modules[k].parameters()]

    @property
    def peak_activation_bytes(self) -> int:
        """Peak bytes saved for backward on this rank during the last step."""
        return self.counter.peak_bytes

    def _remote(self, stage: int) -> bool:
        return self.comm.owner[stage] != self.rank

    def _agree_shapes(self, parts: list[nn.Sequential], example: torch.Tensor) -> list[int]:
        """Dry-run every stage on the example's micro-batches; allocate this rank's buffers.
        Returns the activation bytes each stage saves for one micro-batch (the first one's
        shape)."""
        h = [x.to(device()) for x in split(example, self.m)]
        nbytes = []
        for k, part in enumerate(parts):
            part = on_device(part)
            with torch.random.fork_rng(devices=[]):
                nbytes.append(stage_saved_bytes(part, h[0], k > 0,
                                           self.loss_fn if k == self.last else None))
                with torch.no_grad():
                    out = [part(x) for x in h]
            if k in self.modules:
                metas_in = [TensorMeta.of(x) for x in h]
                metas_out = [TensorMeta.of(y) for y in out]
                self.comm.allocate(k, metas_in if k > 0 and self._remote(k - 1) else None,
                                   metas_out if k < self.last and self._remote(k + 1) else None)
            h = out
        return nbytes

    def step(self, inputs: torch.Tensor | None = None,
             target: torch.Tensor | None = None) -> float | None:
        """Forward and backward of one mini-batch; gradients accumulate into ``.grad``.
        ``inputs`` on the rank of stage 0, ``target`` on the rank of the last stage. Returns
        the mini-batch's mean loss on the last stage's rank, else ``None``."""
        micro_inputs = split(inputs.to(device()), self.m) if 0 in self.modules and \
            inputs is not None else None
        micro_targets = None
        if self.last in self.modules:
            if target is None:
                raise ValueError(f"rank {self.rank} runs the last stage and needs the target")
            micro_targets = split(target.to(device()), self.m)
            self._weights = loss_weights(target.shape[0], self.m)
        if 0 in self.modules and micro_inputs is None:
            raise ValueError(f"rank {self.rank} runs the first stage and needs the inputs")
        for k in self.own:
            self.comm.post_receives(k)
        self.counter.reset_peak()
        self._loss = 0.0
        for a in self.actions:
            k = stage_of(self.rank, a.chunk, self.p, self.placement)
            try:
                if a.kind == "F":
                    self._forward(k, a.microbatch, micro_inputs, micro_targets)
                if a.kind in ("I", "B"):
                    self._input_grad(k, a.microbatch)
                if a.kind in ("W", "B"):
                    self._weight_grad(k, a.microbatch)
            except Exception as exc:
                raise RuntimeError(f"pipeline rank {self.rank}, stage {k}, {a}: "
                                   f"{type(exc).__name__}: {exc}") from exc
        self.comm.finish()
        return self._loss if self.last in self.modules else None

    def _forward(self, k: int, i: int, micro_inputs: list[torch.Tensor] | None,
                 micro_targets: list[torch.Tensor] | None) -> None:
        if k == 0:
            assert micro_inputs is not None
            x = micro_inputs[i]
        else:
            x = (self.comm.wait_activation(k, i) if self._remote(k - 1)
                 else self._local.pop((k, i, "F")))
            x = x.detach().requires_grad_(x.is_floating_point())
        with span(self.tracer, "compute", _label("F", i, k, self.p)), self.counter.count():
            y, outs = forward_capturing(self.modules[k], self.layers[k], x)
            if k == self.last:
                assert micro_targets is not None
                y = self.loss_fn(y, micro_targets[i]) * self._weights[i]
                self._loss += float(y.detach())
        if k < self.last:
            if self._remote(k + 1):
                self.comm.send_activation(k, i, y.detach())
            else:  # the V's turn on the last rank: a copy, like a received buffer
                self._local[(k + 1, i, "F")] = y.detach().clone()
        self._saved[(k, i)] = [x, y, outs, None]

    def _input_grad(self, k: int, i: int) -> None:
        saved = self._saved[(k, i)]
        x, y, outs, _ = saved
        grad = None
        if k < self.last:
            grad = (self.comm.wait_gradient(k, i) if self._remote(k + 1)
                    else self._local.pop((k, i, "B")))
        with span(self.tracer, "compute", _label("I", i, k, self.p)):
            dx, saved[3] = backward_input(y, grad, x, outs)
        if k > 0:
            dx = dx if dx is not None else torch.zeros_like(x)
            if self._remote(k - 1):
                self.comm.send_gradient(k, i, dx)
            else:
                self._local[(k - 1, i, "B")] = dx

    def _weight_grad(self, k: int, i: int) -> None:
        _, _, outs, grads = self._saved.pop((k, i))
        with span(self.tracer, "compute", _label("W", i, k, self.p)):
            backward_weight(self.layers[k], outs, grads)


def stage_saved_bytes(module: nn.Module, x: torch.Tensor, requires_grad: bool,
                 loss_fn: LossFn | None) -> int:
    """Bytes ``module`` saves for backward on ``x`` — and, on the last stage, the loss too
    (its output and target), as :meth:`ZeroBubblePipeline._forward` runs it."""
    if loss_fn is None:
        return saved_bytes(module, x, requires_grad)
    counter = ActivationCounter(module.parameters())
    x = x.detach().requires_grad_(requires_grad and x.is_floating_point())
    with counter.count():
        out = module(x)
        loss = loss_fn(out, torch.zeros_like(out))
    del out, loss
    return counter.peak_bytes


def _label(kind: str, microbatch: int, stage: int, ranks: int) -> str:
    """``I3`` (``I3.1`` on the second chunk), as the schedules print actions."""
    chunk = 0 if stage < ranks else 1
    return f"{kind}{microbatch}" + (f".{chunk}" if chunk else "")
