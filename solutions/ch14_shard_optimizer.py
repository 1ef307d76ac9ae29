"""Chapter 14, reference answer: one ZeRO stage-1 step (reduce-scatter, step, all-gather).

The exercise is in ``exercises/ch14_shard_optimizer.py``; the lab's full ZeRO (stages 0–3, its
own ring collectives) is :mod:`backends.zero`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def stage1_step(flat_param: torch.Tensor, flat_grad: torch.Tensor, shard: torch.nn.Parameter,
                optimizer: torch.optim.Optimizer) -> None:
    """Reduce-scatter the gradients (averaged), step this rank's shard, all-gather the shards."""
    world = dist.get_world_size()
    grad = torch.empty_like(shard)
    dist.reduce_scatter_single(grad, flat_grad)  # the sum of this rank's slice
    shard.grad = grad.div_(world)
    optimizer.step()
    dist.all_gather_single(flat_param, shard.detach().clone())
