"""Chapter 21 exercise, reference answer: the online-softmax merge of two partial attention
results.

See ``exercises/ch21_merge.py`` for the task.
"""

from __future__ import annotations

import torch


def merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the union of two key blocks from each block's output and log-sum-exp."""
    lse = torch.logaddexp(lse_a, lse_b)
    return (torch.exp(lse_a - lse).unsqueeze(-1) * out_a
            + torch.exp(lse_b - lse).unsqueeze(-1) * out_b), lse
