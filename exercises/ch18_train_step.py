"""Chapter 18 exercise: one replica's training step under MirroredStrategy, loss scaled by
the global batch.

TensorFlow's custom training loop under a strategy (textbook chapter 18, "A training step")
runs this function on every replica, each on its slice of the global batch::

    per-example losses → the replica's share of the mean loss → gradients
                       → optimizer.apply_gradients (all-reduce SUM, then update)

The one line that is easy to get wrong is the scaling. The all-reduce **adds** the replicas'
gradients. For the sum to be the gradient of the *batch's mean loss*, each replica must divide
its per-example losses' sum by the **global** batch size — ``tf.nn.compute_average_loss`` —
not take the mean of its own slice: with 7 rows on 3 replicas (3, 3, 1) the third replica's
one example would otherwise weigh as much as three, and with ``k`` equal slices the gradient
would come out ``k`` times too large.

The lab's own step is ``backends.tf_distribute.mirrored.train_step``; its optimizer
``backends.tf_distribute.SGD`` all-reduces inside ``apply_gradients`` when called in a
replica, and is plain SGD outside a strategy.

Grade your answer::

    make grade EX=18.2

and read ``solutions/ch18_train_step.py`` afterwards.
"""

from __future__ import annotations

import torch  # noqa: F401 (torch.autograd.grad, for the step)
from torch import Tensor, nn

from backends.tf_distribute import SGD


def per_example_mse(output: Tensor, target: Tensor) -> Tensor:
    """Each example's squared error, averaged over its features: shape ``(rows,)``."""
    return (output - target).square().flatten(1).mean(1)


def compute_average_loss(per_example_loss: Tensor, global_batch_size: int) -> Tensor:
    """This replica's share of the global batch's mean loss (``tf.nn.compute_average_loss``)."""
    # ===== EXERCISE 18.2: a training step, its loss scaled by the global batch ============
    #
    # Points: 8 (in proportion to the tests of ex18_2 that pass; `make grade EX=18.2`)
    #
    # compute_average_loss: the sum of this replica's per-example losses over the GLOBAL
    # batch size — whatever the size of its own slice, even empty.
    #
    # replica_step (below), one replica's step on its slice (x, y):
    #   1. the per-example losses of model(x) against y (per_example_mse);
    #   2. the replica's share of the mean: compute_average_loss(..., global_batch);
    #   3. the gradients of that loss with respect to model.parameters()
    #      (torch.autograd.grad; an empty slice has gradients too: zeros);
    #   4. optimizer.apply_gradients(pairs of (gradient, parameter)) — it all-reduces the
    #      gradients across the replicas (SUM) before every replica updates its copy;
    #   5. return the loss share, detached: strategy.reduce(SUM, ...) of the replicas'
    #      shares is then the batch's mean loss.
    #
    # Hints:
    #   1. Every replica must call apply_gradients, with the same list of parameters in the
    #      same order: it is a collective (a merge call) — a replica that skips it leaves
    #      the others waiting.
    #   2. torch.autograd.grad(loss, params, allow_unused=True) may give None for a
    #      parameter the loss does not reach; SGD treats None as zeros.
    #   3. Ask yourself why the sum over replicas of Σ_i loss_i / N is the mean loss of the
    #      N examples, and what Σ over replicas of mean_i(loss) is instead.
    #
    # What is graded (tests/exercises/test_ch18_train_step.py, `make grade EX=18.2`):
    #   - compute_average_loss is the sum over the global batch, for any slice;
    #   - three steps on MirroredStrategy(["cpu"] * k), k = 1–4, with awkward global
    #     batches (7 rows on 3 replicas, 5 on 4: an empty slice) give the weights of one
    #     process training on the whole batch with the mean loss, keep the copies in sync,
    #     and the SUM of the returned shares is the batch's mean loss;
    #   - the same weights as the lab's train_step under the same strategy;
    #   - real: two worker processes under MultiWorkerMirroredStrategy, one replica each,
    #     7 rows a step, end with the one-process weights on both workers.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 18.2: implement compute_average_loss in "
                              "exercises/ch18_train_step.py")


def replica_step(model: nn.Module, x: Tensor, y: Tensor, global_batch: int,
                 optimizer: SGD) -> Tensor:
    """One replica's step on its slice ``(x, y)`` of a ``global_batch``-row batch; returns its
    share of the mean loss, detached (EXERCISE 18.2)."""
    raise NotImplementedError("EXERCISE 18.2: implement replica_step in "
                              "exercises/ch18_train_step.py")


