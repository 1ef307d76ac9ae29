"""PipeDream's runtime: asynchronous 1F1B with weight stashing (and optional vertical sync).

PipeDream (Narayanan et al., SOSP 2019, §3.3; book ch. 10–11) never flushes the pipeline: each
micro-batch (a mini-batch in the paper) is followed, on every stage, by a weight update as soon
as that stage has run its backward, so in steady state no rank idles. Two micro-batches in
flight on one stage may therefore see *different* weights. Two rules keep the gradients valid:

* **weight stashing** — the backward of micro-batch ``i`` uses exactly the weights its forward
  used on that stage: we run the forward with ``torch.func.functional_call`` on a stashed copy
  of the weights, so autograd's graph refers to the stash, and the gradient computed against
  the stash is then applied to the *latest* weights;
* **vertical sync** (optional) — every stage uses, for micro-batch ``i``, the version that
  stage 0 used, so a micro-batch sees one consistent model across stages; later stages keep
  older versions around for it.

Which version each forward uses, and how many versions a stage holds at most, come from the
pure schedule :func:`simulator.pipeline.schedules.pipedream_async` — the same plan the
simulated twin times. The order of actions is 1F1B with no flush; the communication module is
the synchronous runtime's (:mod:`backends.pipeline.comm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.func import functional_call

from backends.device import device, on_device
from backends.pipeline.comm import StageComm
from backends.pipeline.partition import partition
from backends.pipeline.runtime import LossFn, agree_shapes, group_ranks
from backends.trace import Tracer, span
from simulator.pipeline.schedules import pipedream_async

Weights = dict[str, torch.Tensor]


class PipeDream:
    """This rank's stage of an asynchronous PipeDream pipeline (SGD updates).

    Args:
        model: the whole ``nn.Sequential``, built identically on every rank.
        balance: layers per stage, one stage per rank of ``group``.
        minibatches: how many micro-batches :meth:`train` streams through.
        lr: the SGD learning rate of every stage's update.
        vertical_sync: use stage 0's weight version on every stage.
        loss_fn: ``loss_fn(output, target)``, a micro-batch's mean loss.
    """

    def __init__(self, model: nn.Sequential, balance: Sequence[int], minibatches: int,
                 lr: float, vertical_sync: bool = False, loss_fn: LossFn | None = None,
                 group: Any = None, tracer: Tracer | None = None) -> None:
        ranks = group_ranks(group)
        self.p, self.rank = len(ranks), ranks.index(dist.get_rank())
        if len(balance) != self.p:
            raise ValueError(f"balance has {len(balance)} stages for {self.p} ranks")
        plan = pipedream_async(self.p, minibatches, vertical_sync=vertical_sync)
        self.actions = plan.schedule[self.rank]
        self.version = plan.version[self.rank]
        self.planned_versions = plan.stashed[self.rank]
        self.n = minibatches
        self.module = on_device(partition(model, balance)[self.rank])
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=lr)
        self.loss_fn = loss_fn or nn.functional.mse_loss
        self.tracer = tracer
        self.comm = StageComm(ranks, group, self.p, minibatches, tracer)
        self.updates = 0
        self.history: dict[int, Weights] = {0: self._snapshot()}
        self.max_versions = 1
        self._stash: dict[int, tuple[torch.Tensor, torch.Tensor, Weights]] = {}

    @property
    def last(self) -> bool:
        """Whether this rank runs the last stage."""
        return self.rank == self.p - 1

    def _snapshot(self) -> Weights:
        return {n: p.detach().clone() for n, p in self.module.named_parameters()}

    def train(self, inputs: Sequence[torch.Tensor] | None = None,
              targets: Sequence[torch.Tensor] | None = None) -> list[float]:
        """Stream the micro-batches through; every stage updates after each backward.

        ``inputs`` (on the first stage's rank) and ``targets`` (on the last's) hold one
        tensor per micro-batch, moved to the rank's device (:func:`backends.device.device`).
        Returns the micro-batches' losses on the last stage's rank.
        """
        inputs = [x.to(device()) for x in inputs] if inputs is not None else None
        targets = [t.to(device()) for t in targets] if targets is not None else None
        if self.rank == 0 and (inputs is None or len(inputs) != self.n):
            raise ValueError(f"the first stage needs {self.n} input micro-batches")
        if self.last and (targets is None or len(targets) != self.n):
            raise ValueError(f"the last stage needs {self.n} target micro-batches")
        agree_shapes(self.comm, {self.rank: self.module},
                     list(inputs) if inputs is not None else None)
        self.comm.post_receives(self.rank)
        losses: list[float] = []
        for action in self.actions:
            i = action.microbatch
            try:
                if action.kind == "F":
                    self._forward(i, inputs, targets, losses)
                else:
                    self._backward(i)
            except Exception as exc:
                raise RuntimeError(f"PipeDream rank {self.rank}, {action}: "
                                   f"{type(exc).__name__}: {exc}") from exc
        self.comm.finish()
        return losses

    def _forward(self, i: int, inputs: Sequence[torch.Tensor] | None,
                 targets: Sequence[torch.Tensor] | None, losses: list[float]) -> None:
        if self.rank == 0:
            assert inputs is not None
            x = inputs[i]
        else:
            x = self.comm.wait_activation(self.rank, i).detach().requires_grad_()
        # the stash: fresh leaves on the version this micro-batch uses (no copy of the data)
        stash = {n: w.detach().requires_grad_() for n, w in self.history[self.version[i]].items()}
        with span(self.tracer, "compute", f"F{i}"):
            y = functional_call(self.module, stash, (x,))
            if self.last:
                assert targets is not None
                y = self.loss_fn(y, targets[i])
                losses.append(float(y.detach()))
        if not self.last:
            self.comm.send_activation(self.rank, i, y.detach())
        self._stash[i] = (x, y, stash)
        self.max_versions = max(self.max_versions, self._versions_alive())

    def _backward(self, i: int) -> None:
        x, y, stash = self._stash.pop(i)
        grad = None if self.last else self.comm.wait_gradient(self.rank, i)
        with span(self.tracer, "compute", f"B{i}"):
            torch.autograd.backward(y, grad_tensors=grad)
            for name, p in self.module.named_parameters():
                p.grad = stash[name].grad
            self.optimizer.step()  # the gradient of the stashed weights, applied to the latest
            self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1
        self.history[self.updates] = self._snapshot()
        self._prune(i)
        if self.rank > 0:
            self.comm.send_gradient(self.rank, i, x.grad if x.grad is not None
                                    else torch.zeros_like(x))

    def _prune(self, done: int) -> None:
        """Drop the versions no later forward will use (in-flight stashes keep theirs)."""
        later = [v for j, v in self.version.items() if j > done and j not in self._stash]
        keep = {self.updates, *later}
        for v in list(self.history):
            if v not in keep:
                del self.history[v]
        self.max_versions = max(self.max_versions, self._versions_alive())

    def _versions_alive(self) -> int:
        """Distinct weight versions held: the kept history and the in-flight stashes."""
        versions = set(self.history) | {self.version[j] for j in self._stash}
        return len(versions)
