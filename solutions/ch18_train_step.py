"""Chapter 18, reference answer: one replica's step, its loss scaled by the global batch
(exercise in ``exercises/ch18_train_step.py``; the lab's own is
:func:`backends.tf_distribute.mirrored.train_step`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from backends.tf_distribute import SGD


def per_example_mse(output: Tensor, target: Tensor) -> Tensor:
    """Each example's squared error, averaged over its features."""
    return (output - target).square().flatten(1).mean(1)


def compute_average_loss(per_example_loss: Tensor, global_batch_size: int) -> Tensor:
    """Σ over this replica's examples / N: the replicas' shares add up to the batch's mean."""
    return per_example_loss.sum() / global_batch_size


def replica_step(model: nn.Module, x: Tensor, y: Tensor, global_batch: int,
                 optimizer: SGD) -> Tensor:
    """Loss share, its gradients, then the optimizer's all-reduce and update."""
    params = list(model.parameters())
    loss = compute_average_loss(per_example_mse(model(x), y), global_batch)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    optimizer.apply_gradients(zip(grads, params, strict=True))
    return loss.detach()
