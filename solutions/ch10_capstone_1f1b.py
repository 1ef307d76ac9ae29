"""Chapter 10 capstone, reference answer: a 1F1B (PipeDream-Flush) pipeline runtime.

:class:`OneFOneB` is one rank's stage of a synchronous pipeline that runs the 1F1B schedule
of PipeDream-Flush (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training",
ICML 2021; textbook chapter 10). Stage ``s`` of ``p`` runs, per mini-batch of ``m``
micro-batches:

1. **warm-up** — the forwards of the first ``min(p − s − 1, m)`` micro-batches: the backward
   of micro-batch 0 cannot reach stage ``s`` before the ``p − s − 1`` stages after it have
   run its forward;
2. **steady state** — one forward of the next micro-batch, one backward of the oldest in
   flight, until every forward has run;
3. **cool-down** — the backwards still owed, oldest first.

So at most ``min(p − s, m)`` micro-batches' activations are alive on stage ``s`` (GPipe keeps
``m``), with GPipe's bubble ``(p − 1)/(m + p − 1)`` of the step. Activations travel forward
and their gradients backward point to point: sends are ``dist.isend`` (the stage goes on
computing; the work and the tensor are kept until the flush), receives are blocking
``dist.recv`` at the moment the input is needed — that wait *is* the bubble. A blocking send
could deadlock in steady state: stage ``s`` would send an activation to ``s + 1`` while
``s + 1`` sends a gradient to ``s``, each waiting for the other to receive.

The loss of the last stage is each micro-batch's mean loss divided by ``m`` (the mean over
micro-batches, as ``torch.distributed.pipelining`` with ``scale_grads=True``); parameter
gradients accumulate in ``.grad`` over the micro-batches, and the optimizer steps once, after
the flush. The lab's full runtime (any schedule, shape agreement, checkpointing, traces) is
:class:`backends.pipeline.runtime.Pipeline`. The exercise is in
``exercises/ch10_capstone_1f1b.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.pipeline.microbatch import micro_batch_sizes, split

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
FORWARD, BACKWARD = 0, 1
"""Directions: an activation crosses a boundary forward, its gradient backward."""


def tag(microbatch: int, direction: int) -> int:
    """The tag of the message of ``microbatch`` in ``direction`` across any boundary."""
    return 2 * microbatch + direction


class OneFOneB:
    """This rank's stage of a 1F1B pipeline; one :meth:`train_step` per mini-batch.

    Args:
        module: this stage's layers (one piece of
            :func:`backends.pipeline.partition.partition`).
        stage: ``s``, this stage's index; ``stages``: ``p``, the pipeline's length.
        microbatches: ``m``, micro-batches per mini-batch.
        batch: examples per mini-batch; ``width``: features of every boundary activation
            (the model's blocks all map ``width`` to ``width``).
        optimizer: over ``module``'s parameters; stepped once per mini-batch.
        loss_fn: ``loss_fn(output, target)``, a micro-batch's mean loss.
        group: the process group whose ranks ``0 … p − 1`` run stages ``0 … p − 1``.

    Attributes:
        prev / next: global ranks of the neighbouring stages (``None`` at the ends).
        micro_inputs / micro_targets: this mini-batch's micro-batches (first / last stage).
        stash: ``stash[i] = (input, output)`` of micro-batch ``i`` between its F and its B.
        sends: ``(work, tensor)`` of every ``isend`` not yet waited for.
        losses: the micro-batches' mean losses of this mini-batch (last stage).
    """

    def __init__(self, module: nn.Module, stage: int, stages: int, microbatches: int,
                 batch: int, width: int, optimizer: torch.optim.Optimizer,
                 loss_fn: LossFn | None = None, group: Any = None) -> None:
        self.module, self.stage, self.p, self.m = module, stage, stages, microbatches
        self.batch, self.width = batch, width
        self.optimizer = optimizer
        self.loss_fn = loss_fn or nn.functional.mse_loss
        self.group = group
        ranks = (list(range(stages)) if group is None
                 else [dist.get_global_rank(group, r) for r in range(stages)])
        self.prev = ranks[stage - 1] if stage > 0 else None
        self.next = ranks[stage + 1] if stage < stages - 1 else None
        self.micro_inputs: list[torch.Tensor] = []
        self.micro_targets: list[torch.Tensor] = []
        self.stash: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.sends: list[tuple[Any, torch.Tensor]] = []
        self.losses: list[float] = []

    @property
    def first(self) -> bool:
        """Whether this is the first stage (it reads the inputs)."""
        return self.stage == 0

    @property
    def last(self) -> bool:
        """Whether this is the last stage (it computes the loss)."""
        return self.stage == self.p - 1

    def load(self, inputs: torch.Tensor | None, target: torch.Tensor | None) -> None:
        """Split this mini-batch into micro-batches: inputs on the first stage, targets on
        the last (``torch.tensor_split`` along dimension 0, :mod:`backends.pipeline.
        microbatch`); forget the last mini-batch's losses."""
        if self.first:
            if inputs is None:
                raise ValueError("the first stage needs the inputs")
            self.micro_inputs = split(inputs, self.m)
        if self.last:
            if target is None:
                raise ValueError("the last stage needs the target")
            self.micro_targets = split(target, self.m)
        self.losses = []

    def activation_shape(self, microbatch: int) -> tuple[int, int]:
        """The shape of micro-batch ``microbatch``'s activation at any boundary (and of its
        gradient): ``(its examples, width)``."""
        return (micro_batch_sizes(self.batch, self.m)[microbatch], self.width)

    def schedule(self) -> list[tuple[str, int]]:
        """This stage's actions in order: ``("F", i)`` and ``("B", i)``."""
        warmup = min(self.p - self.stage - 1, self.m)
        actions = [("F", i) for i in range(warmup)]
        for i in range(self.m - warmup):
            actions += [("F", warmup + i), ("B", i)]
        return actions + [("B", i) for i in range(self.m - warmup, self.m)]

    def forward_step(self, i: int) -> None:
        """F(i): input in, stage forward (loss on the last stage), output on, stash."""
        if self.first:
            x = self.micro_inputs[i]
        else:
            x = torch.empty(self.activation_shape(i))
            dist.recv(x, self.prev, group=self.group, tag=tag(i, FORWARD))
            x.requires_grad_()  # a leaf: its .grad is what the previous stage needs
        y = self.module(x)
        if self.last:
            loss = self.loss_fn(y, self.micro_targets[i])
            self.losses.append(float(loss.detach()))
            y = loss / self.m
        else:
            out = y.detach()
            self.sends.append((dist.isend(out, self.next, group=self.group,
                                          tag=tag(i, FORWARD)), out))
        self.stash[i] = (x, y)

    def backward_step(self, i: int) -> None:
        """B(i): output gradient in, stage backward (into ``.grad``), input gradient back."""
        x, y = self.stash.pop(i)
        if self.last:
            torch.autograd.backward(y)
        else:
            grad = torch.empty(self.activation_shape(i))
            dist.recv(grad, self.next, group=self.group, tag=tag(i, BACKWARD))
            torch.autograd.backward(y, grad_tensors=grad)
        if not self.first:
            assert x.grad is not None
            self.sends.append((dist.isend(x.grad, self.prev, group=self.group,
                                          tag=tag(i, BACKWARD)), x.grad))

    def train_step(self, inputs: torch.Tensor | None = None,
                   target: torch.Tensor | None = None) -> float | None:
        """One mini-batch: the schedule, the flush, one optimizer step. Returns the mean of
        the micro-batches' losses on the last stage, else ``None``."""
        self.optimizer.zero_grad(set_to_none=True)
        self.load(inputs, target)
        for kind, i in self.schedule():
            if kind == "F":
                self.forward_step(i)
            else:
                self.backward_step(i)
        for work, _ in self.sends:  # the flush: every message delivered before the update
            work.wait()
        self.sends.clear()
        self.optimizer.step()
        return sum(self.losses) / self.m if self.last else None
