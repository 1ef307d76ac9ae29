"""Megatron's conjugate operators **f** and **g**, and their sequence-parallel forms, as
``torch.autograd.Function``s (Shoeybi et al., "Megatron-LM", 2019, §3; Korthikanti et al.,
"Reducing Activation Recomputation in Large Transformer Models", 2022, §4.2.2).

* **f** (:class:`CopyToTensorParallel`): identity forward, all-reduce of the gradient backward;
* **g** (:class:`ReduceFromTensorParallel`): all-reduce forward, identity backward;
* with sequence parallelism **ḡ** (:class:`GatherFromSequenceParallel`: all-gather forward,
  reduce-scatter backward) in place of f and a reduce-scatter
  (:class:`ReduceScatterToSequenceParallel`) in place of g — the same bytes as the all-reduce
  they replace.

Activations are ``[s, b, h]``: the sequence is dim 0, features the last dim.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.tensor_parallel.communication import (
    _all_gather,
    _all_reduce,
    _reduce_scatter,
    _split,
)
from backends.tensor_parallel.groups import Group


class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's **f**: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_reduce(grad, ctx.group), None


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's **g**: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class ScatterToTensorParallel(torch.autograd.Function):
    """Keep this rank's slice of the last dimension forward; all-gather it backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _split(x, -1, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_gather(grad, -1, ctx.group), None


class GatherFromTensorParallel(torch.autograd.Function):
    """All-gather the last dimension forward; keep this rank's slice backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _all_gather(x, -1, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _split(grad, -1, ctx.group), None


class ScatterToSequenceParallel(torch.autograd.Function):
    """Keep this rank's ``s/t`` of the sequence (dim 0) forward; all-gather it backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _split(x, 0, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_gather(grad, 0, ctx.group), None


class GatherFromSequenceParallel(torch.autograd.Function):
    """Sequence parallelism's **ḡ** (in place of f): all-gather the sequence forward,
    reduce-scatter the gradient backward (Korthikanti et al. 2022, §4.2.2)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _all_gather(x, 0, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _reduce_scatter(grad, ctx.group), None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """Sequence parallelism's **g**: reduce-scatter along the sequence forward, all-gather
    the gradient backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _reduce_scatter(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_gather(grad, 0, ctx.group), None


def copy_to_tensor_parallel(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """f."""
    return CopyToTensorParallel.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def reduce_from_tensor_parallel(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """g."""
    return ReduceFromTensorParallel.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def gather_from_sequence_parallel(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """ḡ: all-gather forward / reduce-scatter backward."""
    return GatherFromSequenceParallel.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def reduce_scatter_to_sequence_parallel(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """g with sequence parallelism: reduce-scatter forward / all-gather backward."""
    return ReduceScatterToSequenceParallel.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]
