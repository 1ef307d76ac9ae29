"""Chapter 3 exercise 3.2: a server-side update rule, AdaGrad.

A parameter server applies the workers' gradients itself (PS-Lite's request handle; the lab's
``backends/parameter_server/updaters.py`` has SGD and Adam). AdaGrad (Duchi, Hazan & Singer
2011) suits sparse features — a rare feature keeps a large step — and was the classic update of
parameter servers for click-through models. Per key ``i``::

    G_i ← G_i + g_i²
    w_i ← w_i − lr · g_i / (√G_i + eps)

The server calls ``rule(weights, idx, grad)``: ``weights`` is its whole key range (float32),
``idx`` the local positions of the pushed keys (int64, distinct), ``grad`` one value per index.
Keep ``G`` as a tensor over the same range, created on the first call, and update only ``idx``.

Grade your answer::

    make grade CH=03
"""

from __future__ import annotations

import torch


class AdaGrad:
    """AdaGrad as a server-side update rule (``torch.optim.Adagrad`` with its defaults:
    ``initial_accumulator_value = 0``, ``lr_decay = 0``, ``eps = 1e-10``)."""

    def __init__(self, lr: float = 0.01, eps: float = 1e-10) -> None:
        self.lr, self.eps = lr, eps
        self.sum: torch.Tensor | None = None

    def __call__(self, weights: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> None:
        """Apply ``grad`` at positions ``idx`` of ``weights``, in place."""
        # ===== EXERCISE 3.2: AdaGrad on the server ==========================================
        #
        # Points: 6 (in proportion to the tests of ex03_2 that pass; `make grade EX=3.2`)
        #
        # 1. On the first call, self.sum = torch.zeros_like(weights).
        # 2. Accumulate the squares at idx only: self.sum[idx] += grad * grad.
        # 3. Step: weights[idx] -= self.lr * grad / (self.sum[idx].sqrt() + self.eps).
        #    (Index with idx on both sides: weights[idx] is a copy, so write back with -=.)
        #
        # What is graded (tests/exercises/test_ch03_update_rule.py):
        #   - dense pushes: the same weights as torch.optim.Adagrad after several steps;
        #   - sparse pushes (a few keys per step): keys never pushed do not move, the others
        #     equal torch.optim.Adagrad fed zero gradients for the missing keys.
        # ===================================================================================
        raise NotImplementedError("EXERCISE 3.2: implement AdaGrad.__call__ in "
                                  "exercises/ch03_update_rule.py")
