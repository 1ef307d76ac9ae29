"""Chapter 22, reference answer: top-k routing with a capacity.

The exercise is in ``exercises/ch22_capacity.py``; the lab's layer does the same inside
:func:`backends.moe.layer.route`.
"""

from __future__ import annotations

import math

import torch


def route_tokens(logits: torch.Tensor, k: int, capacity_factor: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-k, then slots counted choice-major, kept below the capacity (see the exercise)."""
    tokens, experts = logits.shape
    # softmax is monotonic: the top k of the probabilities are the top k of the logits
    expert = torch.softmax(logits, dim=-1).topk(k, dim=-1).indices
    cap = math.ceil(capacity_factor * tokens * k / experts)
    seen = [0] * experts
    slot = torch.empty_like(expert)
    for j in range(k):  # every first choice before any second choice (GShard, Algorithm 1)
        for t in range(tokens):
            e = int(expert[t, j])
            slot[t, j] = seen[e]
            seen[e] += 1
    kept = slot < cap
    counts = torch.bincount(expert[kept], minlength=experts)
    return expert, kept, counts
