"""Chapter 12 exercise: Megatron's g operator.

Tensor parallelism (textbook chapter 12; Shoeybi et al., "Megatron-LM", 2019, §3) splits a
block's second linear layer by rows: rank ``r`` of ``t`` holds input features
``[r·n/t, (r+1)·n/t)`` of the weight and multiplies them with its slice of the input, so each
rank ends with a *partial* output ``X_r A_r``; the layer's output is their sum. The operator
**g** makes that sum:

* forward: all-reduce (SUM) over the tensor-parallel group — every rank gets ``Σ_r X_r A_r``;
* backward: identity — the gradient of the summed output is already the gradient of each
  partial output (``∂Σ/∂(X_r A_r) = 1``), and every rank holds it in full.

Its conjugate **f** (identity forward, all-reduce backward) sits before the block's first
layer; ``backends/tensor_parallel/operators.py`` has both.

Grade your answer::

    make grade CH=12

and read ``solutions/ch12_g_operator.py`` afterwards.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F


class GOperator(torch.autograd.Function):
    """g: all-reduce forward, identity backward, over ``group`` (``None``: every rank)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        # ===== EXERCISE 12.3: implement the g operator ===========================================
        #
        # Points: 8 (in proportion to the tests of ex12_3 that pass; `make grade EX=12.3`)
        #
        # forward(x, group): return the SUM of x over the ranks of `group`, as a new tensor
        #   (do not change x in place: autograd may still need it). Hints: x.clone(), then
        #   dist.all_reduce(..., group=group). With one rank it is x itself.
        # backward(grad): return (gradient for x, None for group) — the identity.
        #
        # What is graded (tests/exercises/test_ch12_g_operator.py, `make grade CH=12`), on real
        # processes, worlds 2 and 3:
        #   - forward: every rank gets the sum of every rank's input;
        #   - backward: x.grad equals the gradient that came in, not all-reduced;
        #   - row_parallel_linear below, built on your g, equals torch.nn.functional.linear
        #     on the whole input and weight: output, input and weight gradients.
        # ========================================================================================
        raise NotImplementedError("EXERCISE 12.3: implement GOperator.forward in "
                                  "exercises/ch12_g_operator.py")

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        raise NotImplementedError("EXERCISE 12.3: implement GOperator.backward in "
                                  "exercises/ch12_g_operator.py")


def g(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Apply :class:`GOperator`."""
    return GOperator.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def row_parallel_linear(x_shard: torch.Tensor, weight_shard: torch.Tensor,
                        bias: torch.Tensor | None, group: Any = None) -> torch.Tensor:
    """``Y = X A^T + b`` with the weight split by its input features (given, not graded):
    this rank's partial product, summed by g, then the bias once."""
    y = g(F.linear(x_shard, weight_shard), group)
    return y + bias if bias is not None else y


_ = dist  # the answer uses torch.distributed
