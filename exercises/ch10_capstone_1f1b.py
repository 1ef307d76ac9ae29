"""Chapter 10 capstone: a 1F1B (PipeDream-Flush) pipeline runtime.

You write the runtime that *executes* the schedule of exercise 10.1. :class:`OneFOneB` is one
rank's stage of a synchronous pipeline (PipeDream-Flush, Narayanan et al., "Memory-Efficient
Pipeline-Parallel DNN Training", ICML 2021; textbook chapter 10). Stage ``s`` of ``p`` runs,
per mini-batch of ``m`` micro-batches:

1. **warm-up** — forwards only, as many as stage ``s`` can run before the backward of
   micro-batch 0 can possibly come back to it;
2. **steady state** — one forward of the next micro-batch, one backward of the oldest in
   flight, until every forward has run;
3. **cool-down** — the backwards still owed, oldest first.

Activations travel forward and their gradients backward, point to point, between
neighbouring stages; the last stage computes the loss; parameter gradients accumulate in
``.grad`` over the micro-batches; after the *flush* (every micro-batch's backward done,
every message delivered) the optimizer steps once. 1F1B keeps at most ``min(p − s, m)``
micro-batches' activations alive on stage ``s`` (GPipe keeps ``m``) with GPipe's bubble,
``(p − 1)/(m + p − 1)`` of the step (:mod:`simulator.pipeline.schedules`).

The constructor, the micro-batching (:meth:`OneFOneB.load`), the shapes of the messages
(:meth:`OneFOneB.activation_shape`) and their tags (:func:`tag`) are given; you write the
four methods under the banner. The lab's full runtime (any schedule, shape agreement,
checkpointing, traces) is :class:`backends.pipeline.runtime.Pipeline` — read it *after* you
are done, like ``torch/distributed/pipelining/schedules.py``.

Grade your answer::

    make grade EX=10.4

and read ``solutions/ch10_capstone_1f1b.py`` afterwards.
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

    # ===== EXERCISE 10.4: a 1F1B pipeline runtime ===========================================
    #
    # Points: 20 (in proportion to the tests of ex10_4 that pass; `make grade EX=10.4`)
    #
    # Write the four methods below. The grader builds one OneFOneB per rank and calls only
    # train_step, once per mini-batch, as PyTorch's Schedule1F1B.step is called:
    #
    #     loss = runtime.train_step(x if first else None, target if last else None)
    #
    # (a) schedule: this stage's actions in order, ("F", i) and ("B", i) — exercise 10.1's
    #     list for one stage. How many forwards can stage s run before the backward of
    #     micro-batch 0 can reach it? Careful when m < p.
    # (b) forward_step(i): micro-batch i's input (the first stage's own, or received from
    #     self.prev), the stage's forward as self.module(x), the loss on the last stage, the
    #     output sent to self.next; keep in self.stash what backward_step(i) will need.
    # (c) backward_step(i): the gradient of micro-batch i's output (received from self.next;
    #     the last stage starts from its loss), autograd's backward through the stage, the
    #     gradient of the stage's input sent back to self.prev.
    # (d) train_step: clear the gradients, self.load the mini-batch, run self.schedule()
    #     calling self.forward_step(i) / self.backward_step(i) for each action, flush, one
    #     optimizer step; return the mean loss on the last stage, None elsewhere.
    #
    # Hints:
    #   1. dist.recv(tensor, src, group=..., tag=...) blocks until the message is in and
    #      writes it into the tensor you give: allocate it as torch.empty of
    #      self.activation_shape(i) (a gradient has its activation's shape). Tag every
    #      message with tag(i, FORWARD) or tag(i, BACKWARD), on both sides.
    #   2. A received activation is a fresh tensor with no history: make it a leaf that
    #      requires grad, and after the backward its .grad is exactly what the previous stage
    #      is owed. Send the numbers, not your graph: y.detach().
    #   3. torch.autograd.backward(y, grad_tensors=g) runs backward from a non-scalar output
    #      whose gradient g you know; it adds into every parameter's .grad, so micro-batches
    #      accumulate for free — as long as nobody zeroes in between.
    #   4. The loss of the mini-batch is the mean over the m micro-batches of each one's mean
    #      loss (PyTorch's pipelining with scale_grads=True): which tensor do you call
    #      backward on, so the accumulated gradients are those of that mean?
    #   5. Send with dist.isend; it returns at once with a work. Why not dist.send: in steady
    #      state stage s has just computed a forward and hands its activation to s + 1, while
    #      s + 1 has just computed a backward and hands its gradient to s. If each insisted on
    #      its send being received before it receives anything … The tensor must stay alive
    #      until the message is out: keep (work, tensor) in self.sends, wait() for all of
    #      them at the flush, before the optimizer changes the weights.
    #   6. Order inside one action: wait for the input it needs, compute, send what it
    #      produced — at once, before waiting for anything else. A stage that receives an
    #      input earlier than the action that needs it idles for nothing.
    #   7. After a micro-batch's backward, drop its stash entry: that is what frees its
    #      activations, and why 1F1B holds fewer than GPipe.
    #
    # What is graded (tests/exercises/test_ch10_capstone_1f1b.py, `make grade EX=10.4`), on
    # 2, 3 and 4 real processes (gloo), an MLP of blocks cut unevenly, m from fewer than the
    # stages to twice as many, not always a multiple of them:
    #   - losses, gradients and parameters after 2 SGD steps (momentum 0.9) equal
    #     torch.distributed.pipelining's Schedule1F1B on the same split (ScheduleGPipe when
    #     m < p, which Schedule1F1B refuses; a flushed pipeline computes the same numbers);
    #   - each stage calls forward_step/backward_step in exactly the order of
    #     simulator.pipeline.schedules.one_f_one_b for it;
    #   - the bytes saved for backward peak at min(p − s, m) micro-batches' worth on stage s;
    #   - the bubble, structurally: between two computes a stage first sends what the first
    #     produced, then receives only the input of the second — so it idles only where
    #     1F1B's dependencies make it, as the simulator's timeline assumes.
    # ========================================================================================

    def schedule(self) -> list[tuple[str, int]]:
        """This stage's actions in order: ``("F", i)`` and ``("B", i)``."""
        # EXERCISE 10.4 (a): see the banner above
        raise NotImplementedError("EXERCISE 10.4: implement OneFOneB.schedule in "
                                  "exercises/ch10_capstone_1f1b.py")

    def forward_step(self, i: int) -> None:
        """F(i): input in, stage forward (loss on the last stage), output on, stash."""
        # EXERCISE 10.4 (b): see the banner above
        raise NotImplementedError("EXERCISE 10.4: implement OneFOneB.forward_step in "
                                  "exercises/ch10_capstone_1f1b.py")

    def backward_step(self, i: int) -> None:
        """B(i): output gradient in, stage backward (into ``.grad``), input gradient back."""
        # EXERCISE 10.4 (c): see the banner above
        raise NotImplementedError("EXERCISE 10.4: implement OneFOneB.backward_step in "
                                  "exercises/ch10_capstone_1f1b.py")

    def train_step(self, inputs: torch.Tensor | None = None,
                   target: torch.Tensor | None = None) -> float | None:
        """One mini-batch: the schedule, the flush, one optimizer step. Returns the mean of
        the micro-batches' losses on the last stage, else ``None``."""
        # EXERCISE 10.4 (d): see the banner above
        raise NotImplementedError("EXERCISE 10.4: implement OneFOneB.train_step in "
                                  "exercises/ch10_capstone_1f1b.py")
