"""Megatron's tensor-parallel layers (Shoeybi et al., "Megatron-LM", 2019, §3).

The first linear layer of a block split by **columns** (:class:`ColumnParallelLinear`: rank
``r`` holds output features ``[r·n/t, (r+1)·n/t)``), the second by **rows**
(:class:`RowParallelLinear`: input features of the same slice), so the nonlinearity between
them needs no communication: :class:`ParallelMLP`, :class:`ParallelSelfAttention` (heads
``[r·a/t, (r+1)·a/t)``), and the word embedding split by vocabulary
(:class:`VocabParallelEmbedding`).

Units: sizes in elements.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from backends.tensor_parallel.communication import _rank, _size
from backends.tensor_parallel.groups import Group
from backends.tensor_parallel.operators import (
    GatherFromTensorParallel,
    ScatterToTensorParallel,
    copy_to_tensor_parallel,
    gather_from_sequence_parallel,
    reduce_from_tensor_parallel,
    reduce_scatter_to_sequence_parallel,
)


def _per_rank(n: int, t: int, what: str) -> int:
    if n % t:
        raise ValueError(f"{what} ({n}) is not divisible by the tensor-parallel size {t}")
    return n // t


def _mark_sequence_parallel(param: torch.Tensor) -> torch.Tensor:
    """A replicated parameter that sees only this rank's part of the sequence: its gradient
    is partial and :func:`finish_gradients` sums it over the tensor group."""
    param.sequence_parallel = True  # type: ignore[attr-defined]
    return param


class ColumnParallelLinear(nn.Module):
    """``Y = XA + b`` with ``A`` split by columns: this rank holds ``out/t`` output features.

    The input goes through f (or, with ``sequence_parallel``, is all-gathered along the
    sequence); ``gather_output`` all-gathers the output features, otherwise each rank keeps
    its ``out/t`` (the input of a :class:`RowParallelLinear`).
    """

    def __init__(self, in_features: int, out_features: int, group: Group = None,
                 bias: bool = True, gather_output: bool = False,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        self.group, self.gather_output = group, gather_output
        self.sequence_parallel = sequence_parallel
        local = _per_rank(out_features, _size(group), "output features")
        self.weight = nn.Parameter(torch.empty(local, in_features))
        self.bias = nn.Parameter(torch.zeros(local)) if bias else None
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sequence_parallel:
            x = gather_from_sequence_parallel(x, self.group)
        else:
            x = copy_to_tensor_parallel(x, self.group)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output:
            y = GatherFromTensorParallel.apply(y, self.group)  # type: ignore[no-untyped-call]
        return y


class RowParallelLinear(nn.Module):
    """``Y = XA + b`` with ``A`` split by rows: this rank holds ``in/t`` input features.

    ``input_is_parallel``: the input is already this rank's slice (a column-parallel layer's
    output); otherwise it is split here. The partial products are summed by g (all-reduce;
    reduce-scatter along the sequence with ``sequence_parallel``), then the bias is added once.
    """

    def __init__(self, in_features: int, out_features: int, group: Group = None,
                 bias: bool = True, input_is_parallel: bool = True,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        self.group, self.input_is_parallel = group, input_is_parallel
        self.sequence_parallel = sequence_parallel
        local = _per_rank(in_features, _size(group), "input features")
        self.weight = nn.Parameter(torch.empty(out_features, local))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        if self.bias is not None and sequence_parallel:
            _mark_sequence_parallel(self.bias)
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = ScatterToTensorParallel.apply(x, self.group)  # type: ignore[no-untyped-call]
        y = F.linear(x, self.weight)
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel(y, self.group)
        else:
            y = reduce_from_tensor_parallel(y, self.group)
        return y + self.bias if self.bias is not None else y


class ParallelMLP(nn.Module):
    """``GeLU(X A) B``: ``A`` by columns, ``B`` by rows, one g at the end (Shoeybi et al. §3)."""

    def __init__(self, hidden: int, group: Group = None, ffn: int | None = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        ffn = ffn or 4 * hidden
        self.fc1 = ColumnParallelLinear(hidden, ffn, group, sequence_parallel=sequence_parallel)
        self.fc2 = RowParallelLinear(ffn, hidden, group, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))  # type: ignore[no-any-return]


class ParallelSelfAttention(nn.Module):
    """Causal self-attention with the heads split over the group: this rank's ``a/t`` heads'
    Q, K, V (a column-parallel ``h → 3h``), the attention itself local, the output projection
    row-parallel. The fused QKV weight is laid out ``[3, heads, head_dim]`` by output feature;
    rank ``r`` keeps heads ``[r·a/t, (r+1)·a/t)`` of each of the three."""

    def __init__(self, hidden: int, heads: int, group: Group = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {heads} heads")
        self.local_heads = _per_rank(heads, _size(group), "the number of attention heads")
        self.head_dim = hidden // heads
        self.qkv = ColumnParallelLinear(hidden, 3 * hidden, group,
                                        sequence_parallel=sequence_parallel)
        self.proj = RowParallelLinear(hidden, hidden, group, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x)  # [s, b, 3·a/t·d]
        s, b = qkv.shape[:2]
        q, k, v = qkv.view(s, b, 3, self.local_heads, self.head_dim).permute(2, 1, 3, 0, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, a/t, s, d]
        return self.proj(out.permute(2, 0, 1, 3).reshape(s, b, -1))  # type: ignore[no-any-return]


class VocabParallelEmbedding(nn.Module):
    """The word embedding split by vocabulary: rank ``r`` holds rows ``[r·V/t, (r+1)·V/t)``,
    looks up the tokens in its range, zeros the others, and g sums the parts (a
    reduce-scatter along the sequence with ``sequence_parallel``)."""

    def __init__(self, vocab: int, hidden: int, group: Group = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        local = _per_rank(vocab, _size(group), "the vocabulary size")
        self.start = _rank(group) * local
        self.weight = nn.Parameter(torch.empty(local, hidden))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        local = tokens - self.start
        outside = (local < 0) | (local >= self.weight.shape[0])
        out = F.embedding(local.masked_fill(outside, 0), self.weight)
        out = out.masked_fill(outside.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return reduce_scatter_to_sequence_parallel(out, self.group)
        return reduce_from_tensor_parallel(out, self.group)
