"""Cross-entropy over logits split by vocabulary (Shoeybi et al., "Megatron-LM", 2019, §3,
"input embedding"): two all-reduces of ``s·b`` numbers (max and sum) and one of the target's
logit, never the ``s·b·V`` logits. Losses in nats.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from backends.tensor_parallel.communication import _all_reduce_, _rank
from backends.tensor_parallel.groups import Group


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Cross-entropy of logits split by vocabulary (Shoeybi et al. §3): all-reduce the max
    (stability), the target's logit (held by one rank) and the sum of exponentials — three
    all-reduces of ``s·b`` numbers instead of gathering ``s·b·V`` logits. Backward is local:
    ``softmax − onehot`` on this rank's slice."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor,
                group: Group) -> torch.Tensor:
        local = logits.shape[-1]
        start = _rank(group) * local
        most = logits.detach().max(dim=-1).values
        _all_reduce_(most, group, dist.ReduceOp.MAX)
        shifted = logits.detach() - most.unsqueeze(-1)
        index = target - start
        outside = (index < 0) | (index >= local)
        index = index.masked_fill(outside, 0)
        picked = shifted.gather(-1, index.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        exp = shifted.exp()
        total = exp.sum(dim=-1)
        _all_reduce_(picked, group)
        _all_reduce_(total, group)
        softmax = exp / total.unsqueeze(-1)
        ctx.save_for_backward(softmax, index, outside)
        return total.log() - picked

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        softmax, index, outside = ctx.saved_tensors
        onehot = torch.zeros_like(softmax).scatter_(-1, index.unsqueeze(-1),
                                                    (~outside).to(softmax.dtype).unsqueeze(-1))
        return (softmax - onehot) * grad.unsqueeze(-1), None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, target: torch.Tensor,
                                 group: Group = None) -> torch.Tensor:
    """Per-token loss (nats) from this rank's ``V/t`` logits and the full target ids."""
    return VocabParallelCrossEntropy.apply(logits, target, group)  # type: ignore[no-untyped-call,no-any-return]
