"""Chapter 3, reference answer 3.2: AdaGrad as a server-side update rule."""

from __future__ import annotations

import torch


class AdaGrad:
    """AdaGrad (Duchi, Hazan & Singer 2011) per key, lazily for sparse pushes."""

    def __init__(self, lr: float = 0.01, eps: float = 1e-10) -> None:
        self.lr, self.eps = lr, eps
        self.sum: torch.Tensor | None = None

    def __call__(self, weights: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> None:
        """Apply ``grad`` at positions ``idx`` of ``weights``, in place."""
        if self.sum is None:
            self.sum = torch.zeros_like(weights)
        self.sum[idx] += grad * grad
        weights[idx] -= self.lr * grad / (self.sum[idx].sqrt() + self.eps)
