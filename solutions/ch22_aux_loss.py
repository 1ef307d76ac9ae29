"""Chapter 22, reference answer: Switch's auxiliary load-balancing loss.

The exercise is in ``exercises/ch22_aux_loss.py``; the lab's layer computes the same inside
:func:`backends.moe.layer.route`.
"""

from __future__ import annotations

import torch


def load_balancing_loss(probs: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """``N · Σ_i f_i · P_i``: ``f`` from first choices (no gradient), ``P`` the mean
    probability per expert."""
    experts = probs.shape[-1]
    f = torch.bincount(expert[:, 0], minlength=experts).to(probs.dtype) / probs.shape[0]
    return experts * (f * probs.mean(dim=0)).sum()
