"""Server-side update rules: what a server does with a pushed gradient.

In PS-Lite the server's *request handle* is user code (``KVServer::set_request_handle``); the
default one (``KVServerDefaultHandle``) just adds what is pushed. An update rule here gets the
server's weights for its key range, the *local* positions of the pushed keys, and the pushed
values, and changes the weights in place — keeping any per-key state (Adam's moments) in
arrays over the same range, so a sparse push touches only its keys' state ("lazy" updates, as
``torch.optim.SparseAdam``). With every key pushed every step they equal ``torch.optim``'s.
"""

from __future__ import annotations

from typing import Protocol

import torch


class UpdateRule(Protocol):
    """``rule(weights, idx, grad)``: apply ``grad`` (float32, one per index) at ``idx``."""

    def __call__(self, weights: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> None:
        ...


class SGD:
    """``w ← w − lr·g`` (Robbins & Monro 1951)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def __call__(self, weights: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> None:
        weights.index_add_(0, idx, grad, alpha=-self.lr)


class Adam:
    """Adam (Kingma & Ba 2015) per key, with a step count per key (lazy for sparse pushes)."""

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.lr, self.betas, self.eps = lr, betas, eps
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.step: torch.Tensor | None = None

    def __call__(self, weights: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> None:
        if self.m is None or self.v is None or self.step is None:
            self.m, self.v = torch.zeros_like(weights), torch.zeros_like(weights)
            self.step = torch.zeros_like(weights)
        b1, b2 = self.betas
        self.step[idx] += 1
        t = self.step[idx]
        m = self.m[idx].mul_(b1).add_(grad, alpha=1 - b1)
        v = self.v[idx].mul_(b2).addcmul_(grad, grad, value=1 - b2)
        self.m[idx], self.v[idx] = m, v
        denom = (v / (1 - b2 ** t)).sqrt_().add_(self.eps)
        weights[idx] -= self.lr * (m / (1 - b1 ** t)) / denom


def make_rule(name: str, lr: float) -> UpdateRule:
    """An update rule by name: ``sgd`` or ``adam``."""
    if name == "sgd":
        return SGD(lr)
    if name == "adam":
        return Adam(lr)
    raise ValueError(f"unknown update rule {name!r}; choose sgd or adam")


__all__ = ["SGD", "Adam", "UpdateRule", "make_rule"]
