"""Megatron-LM's tensor (intra-layer) parallelism, from scratch on ``torch.distributed``.

Twin of :mod:`simulator.tensor_parallel` (book chapter 12). A transformer layer's matrix
multiplications are split over the ``t`` ranks of a *tensor-parallel group* (Shoeybi et al.,
"Megatron-LM", 2019, §3):

* the first linear layer of a block by **columns** (:class:`ColumnParallelLinear`: rank ``r``
  holds output features ``[r·n/t, (r+1)·n/t)``; attention: heads ``[r·a/t, (r+1)·a/t)``), the
  second by **rows** (:class:`RowParallelLinear`: input features of the same slice), so the
  nonlinearity (GeLU, softmax) between them needs no communication;
* the operator **f** (:class:`CopyToTensorParallel`) before a block: identity forward,
  all-reduce of the input's gradient backward; **g** (:class:`ReduceFromTensorParallel`) after
  it: all-reduce of the partial outputs forward, identity backward — two all-reduces per
  layer forward, two backward;
* the word embedding split by **vocabulary** (:class:`VocabParallelEmbedding`), tied with the
  output layer, whose logits stay split: :func:`vocab_parallel_cross_entropy` needs only two
  all-reduces of ``b·s`` numbers (max and sum) and one of the target's logit, never the
  ``b·s·V`` logits (§3, "input embedding").

**Sequence parallelism** (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", 2022, §4.2.2): the layer norms and dropouts between the blocks, which
tensor parallelism replicates, run on ``s/t`` of the sequence instead. ``g`` becomes a
reduce-scatter along the sequence (:class:`ReduceScatterToSequenceParallel`: reduce-scatter
forward, all-gather backward) and ``f`` its conjugate ``ḡ`` (:class:`GatherFromSequenceParallel`:
all-gather forward, reduce-scatter backward) — the same bytes as the all-reduce they replace
(an all-reduce is a reduce-scatter followed by an all-gather). The replicated parameters that
then see only a part of the sequence (layer norms, the row-parallel biases, the position
embedding) get partial gradients, summed over the group by :func:`finish_gradients`.

Activations are laid out ``[s, b, h]`` (sequence first, as Megatron), so a sequence shard is
a contiguous block. Process groups for a ``t × p × d`` grid are built as Megatron's
``initialize_model_parallel`` builds them (:func:`megatron_groups`, :func:`init_groups`).

Units: sizes in elements; nothing here is timed (``benchmarks/tensor_parallel_accuracy.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from backends.collectives.reduce_scatter import ring_reduce_scatter

Group = Any
"""A ``torch.distributed`` process group (``None``: the default group)."""


# ---- process groups -----------------------------------------------------------------------

@dataclass(frozen=True)
class ParallelGroups:
    """The rank lists of a ``t × p × d`` grid (every group, each a list of global ranks).

    Megatron's order (``initialize_model_parallel``): ``rank = pp·(t·d) + dp·t + tp`` —
    tensor groups are ``t`` consecutive ranks (one node, NVLink), data groups take every
    ``t``-th rank inside a pipeline stage's block of ``t·d`` ranks, pipeline groups every
    ``t·d``-th rank. ``embedding`` pairs a pipeline's first and last stage (the tied word
    embedding's gradient).
    """

    t: int
    p: int
    d: int
    tensor: list[list[int]]
    pipeline: list[list[int]]
    data: list[list[int]]
    embedding: list[list[int]]

    def of(self, kind: str, rank: int) -> list[int]:
        """The group of ``kind`` (tensor, pipeline, data, embedding) that holds ``rank``."""
        for ranks in getattr(self, kind):
            if rank in ranks:
                return list(ranks)
        raise ValueError(f"rank {rank} is in no {kind} group")


def megatron_groups(world_size: int, t: int, p: int = 1) -> ParallelGroups:
    """Every group of ``world_size`` ranks with tensor size ``t`` and pipeline size ``p``.

    A pure function (no processes). ``d = world_size / (t·p)``. Example (Megatron-LM's
    docstring): 16 ranks, ``t = 2``, ``p = 4`` give the tensor groups [0,1] [2,3] … [14,15],
    the data groups [0,2] [1,3] [4,6] [5,7] …, the pipeline groups [0,4,8,12] [1,5,9,13]
    [2,6,10,14] [3,7,11,15].
    """
    if t < 1 or p < 1:
        raise ValueError(f"tensor and pipeline sizes must be at least 1, got t={t}, p={p}")
    if world_size % (t * p):
        raise ValueError(f"world size {world_size} is not a multiple of t·p = {t}·{p}")
    d = world_size // (t * p)
    per_stage = t * d  # ranks in one pipeline stage
    tensor = [list(range(k * t, (k + 1) * t)) for k in range(world_size // t)]
    data = [list(range(s * per_stage + j, (s + 1) * per_stage, t))
            for s in range(p) for j in range(t)]
    pipeline = [list(range(k, world_size, per_stage)) for k in range(per_stage)]
    embedding = [[g[0], g[-1]] if len(g) > 1 else [g[0]] for g in pipeline]
    return ParallelGroups(t, p, d, tensor, pipeline, data, embedding)


def init_groups(t: int, p: int = 1) -> dict[str, Group]:
    """Create every group with ``dist.new_group`` (all ranks call it, in the same order, as
    ``new_group`` requires) and return this rank's tensor, pipeline, data groups, and its
    embedding group when ``p > 1`` and it runs the first or the last stage."""
    world, rank = dist.get_world_size(), dist.get_rank()
    grid = megatron_groups(world, t, p)
    mine: dict[str, Group] = {}
    for kind in ("tensor", "pipeline", "data", "embedding"):
        for ranks in getattr(grid, kind):
            if kind == "embedding" and len(ranks) == 1:
                continue  # p = 1: the output layer IS the embedding, nothing to sum
            group = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = group
    return mine


# ---- collectives on a group ---------------------------------------------------------------

class ProfileGroup:
    """A stand-in for a group of ``size`` ranks inside ONE process, to profile a rank's
    compute: sizes and ranks are the real group's, every collective is replaced by a local
    copy of the right shape (numbers are not meaningful) and logged in :attr:`log` as
    ``(kind, group, bytes, entered_s, left_s)`` (``time.perf_counter``), so the compute
    between collectives can be timed (:func:`lab.tensor_parallel.profile_ops`).

    ``wait``: called first in every stand-in collective (inside the logged span), e.g. one
    blocking exchange of a tiny message with another profiling process — so that the
    compute after each collective is timed as it runs in a real step, right after the
    thread slept in a blocking wait (``lab.tensor_parallel.wait_step``)."""

    def __init__(self, size: int, rank: int, name: str, log: list[tuple[Any, ...]],
                 wait: Callable[[], None] | None = None) -> None:
        self.size, self.rank, self.name, self.log = size, rank, name, log
        self.wait = wait

    def enter(self) -> float:
        """Start of a stand-in collective: its entry time (s, ``perf_counter``), then the
        wait if there is one."""
        now = time.perf_counter()
        if self.wait is not None:
            self.wait()
        return now


def _size(group: Group) -> int:
    if isinstance(group, ProfileGroup):
        return group.size
    return int(dist.get_world_size(group))


def _rank(group: Group) -> int:
    if isinstance(group, ProfileGroup):
        return group.rank
    return int(dist.get_rank(group))


def _all_reduce_(x: torch.Tensor, group: Group, op: Any = None) -> None:
    """In-place all-reduce (SUM unless ``op``) over ``group``; nothing with one rank."""
    if _size(group) == 1:
        return
    if isinstance(group, ProfileGroup):
        start = group.enter()
        group.log.append(("all_reduce", group.name, x.numel() * x.element_size(), start,
                          time.perf_counter()))
        return
    dist.all_reduce(x, op=op or dist.ReduceOp.SUM, group=group)


def _all_reduce(x: torch.Tensor, group: Group) -> torch.Tensor:
    if _size(group) == 1:
        return x
    x = x.contiguous().clone()
    _all_reduce_(x, group)
    return x


def _all_gather(x: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim``, in group-rank order."""
    t = _size(group)
    if t == 1:
        return x
    if isinstance(group, ProfileGroup):
        start = group.enter()
        out = torch.cat([x] * t, dim=dim)
        group.log.append(("all_gather", group.name, out.numel() * out.element_size(), start,
                          time.perf_counter()))
        return out
    parts = [torch.empty_like(x) for _ in range(t)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _split(x: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """This rank's ``1/t`` slice of ``x`` along ``dim``."""
    t = _size(group)
    if t == 1:
        return x
    if x.shape[dim] % t:
        raise ValueError(f"dimension {dim} of size {x.shape[dim]} does not split over {t} ranks")
    return x.chunk(t, dim=dim)[_rank(group)].contiguous()


def _reduce_scatter(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Sum over the group, keep this rank's ``1/t`` along dim 0 (the lab's ring reduce-scatter,
    :mod:`backends.collectives.reduce_scatter`)."""
    t = _size(group)
    if t == 1:
        return x
    if x.shape[0] % t:
        raise ValueError(f"sequence length {x.shape[0]} does not split over {t} ranks")
    x = x.contiguous()
    out = torch.empty((x.shape[0] // t, *x.shape[1:]), dtype=x.dtype)
    if isinstance(group, ProfileGroup):
        start = group.enter()
        out.copy_(x[: out.shape[0]])
        group.log.append(("reduce_scatter", group.name, x.numel() * x.element_size(), start,
                          time.perf_counter()))
        return out
    ring_reduce_scatter(out.view(-1), x.view(-1), group=group)
    return out


# ---- the conjugate operators (autograd Functions) ------------------------------------------

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


# ---- layers -------------------------------------------------------------------------------

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


# ---- a small GPT, unsharded and tensor-parallel ---------------------------------------------

@dataclass(frozen=True)
class GPTConfig:
    """A pre-layer-norm GPT (Radford et al. 2019), tied input/output embedding."""

    layers: int = 2
    hidden: int = 32
    heads: int = 4
    vocab: int = 64
    seq: int = 16
    dropout: float = 0.0

    def check(self, t: int, sequence_parallel: bool = False) -> None:
        """Raise a one-line ValueError unless the model splits over ``t`` ranks."""
        _per_rank(self.heads, t, "the number of attention heads")
        _per_rank(self.vocab, t, "the vocabulary size")
        _per_rank(4 * self.hidden, t, "the MLP width")
        if sequence_parallel:
            _per_rank(self.seq, t, "the sequence length (sequence parallelism)")


class Block(nn.Module):
    """One unsharded transformer layer (the reference), ``[b, s, h]``."""

    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.hidden), nn.LayerNorm(c.hidden)
        self.qkv = nn.Linear(c.hidden, 3 * c.hidden)
        self.proj = nn.Linear(c.hidden, c.hidden)
        self.fc1 = nn.Linear(c.hidden, 4 * c.hidden)
        self.fc2 = nn.Linear(4 * c.hidden, c.hidden)
        self.heads, self.drop = c.heads, nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads
                                             ).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, s, h)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))  # type: ignore[no-any-return]


class GPT(nn.Module):
    """The unsharded reference: tokens ``[b, s]`` → logits ``[b, s, V]``."""

    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.config = c
        self.wte, self.wpe = nn.Embedding(c.vocab, c.hidden), nn.Embedding(c.seq, c.hidden)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.lnf, self.drop = nn.LayerNorm(c.hidden), nn.Dropout(c.dropout)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.wte(tokens) + self.wpe.weight[: tokens.shape[1]])
        for block in self.blocks:
            x = block(x)
        return F.linear(self.lnf(x), self.wte.weight)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy, nats."""
        logits = self(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class ParallelBlock(nn.Module):
    """One tensor-parallel layer, ``[s, b, h]`` (``[s/t, b, h]`` with sequence parallelism):
    layer norm and dropout replicated (or on the sequence shard), attention and MLP split."""

    def __init__(self, c: GPTConfig, group: Group, sequence_parallel: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.hidden), nn.LayerNorm(c.hidden)
        if sequence_parallel:
            for p in [*self.ln1.parameters(), *self.ln2.parameters()]:
                _mark_sequence_parallel(p)
        self.attn = ParallelSelfAttention(c.hidden, c.heads, group, sequence_parallel)
        self.mlp = ParallelMLP(c.hidden, group, sequence_parallel=sequence_parallel)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))  # type: ignore[no-any-return]


class ParallelGPT(nn.Module):
    """:class:`GPT` split over a tensor-parallel group of ``t`` ranks (Megatron's layout).

    ``forward`` returns this rank's ``V/t`` logits ``[b, s, V/t]``; ``loss`` the mean
    cross-entropy from them (:func:`vocab_parallel_cross_entropy`), equal on every rank.
    With dropout > 0 the masks are drawn per rank (Megatron forks its RNG per tensor rank
    for the split regions); the parity tests use dropout 0.
    """

    def __init__(self, c: GPTConfig, group: Group = None, sequence_parallel: bool = False
                 ) -> None:
        super().__init__()
        c.check(_size(group), sequence_parallel)
        self.config, self.group, self.sequence_parallel = c, group, sequence_parallel
        self.wte = VocabParallelEmbedding(c.vocab, c.hidden, group, sequence_parallel)
        self.wpe = nn.Embedding(c.seq, c.hidden)
        self.blocks = nn.ModuleList(ParallelBlock(c, group, sequence_parallel)
                                    for _ in range(c.layers))
        self.lnf, self.drop = nn.LayerNorm(c.hidden), nn.Dropout(c.dropout)
        if sequence_parallel:
            for p in [*self.lnf.parameters(), self.wpe.weight]:
                _mark_sequence_parallel(p)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens ``[b, s]`` → the first layer's input ``[s, b, h]`` (``[s/t, b, h]`` with
        sequence parallelism): word embedding (vocabulary-parallel) plus position."""
        s = tokens.shape[1]
        pos = self.wpe.weight[:s].unsqueeze(1)  # [s, 1, h]
        if self.sequence_parallel:
            pos = _split(pos, 0, self.group)
        return self.drop(self.wte(tokens.t()) + pos)  # type: ignore[no-any-return]

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """The last layer's output → this rank's ``V/t`` logits ``[s, b, V/t]``: final layer
        norm, then the output layer tied to the word embedding."""
        x = self.lnf(x)
        if self.sequence_parallel:
            x = gather_from_sequence_parallel(x, self.group)
        else:
            x = copy_to_tensor_parallel(x, self.group)
        return F.linear(x, self.wte.weight)

    def local_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """This rank's vocabulary slice of the logits, ``[s, b, V/t]``."""
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.local_logits(tokens).transpose(0, 1)

    def full_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """All ``V`` logits ``[b, s, V]`` (an all-gather; for tests, not for training)."""
        return _all_gather(self(tokens), -1, self.group)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy, nats."""
        per_token = vocab_parallel_cross_entropy(self.local_logits(tokens), targets.t(),
                                                 self.group)
        return per_token.mean()


# ---- sharding a reference, finishing gradients -------------------------------------------

def _shard_rule(name: str) -> str:
    """How parameter ``name`` of :class:`ParallelGPT` is cut from :class:`GPT`'s."""
    if name == "wte.weight":
        return "rows"
    if name.endswith(("qkv.weight", "qkv.bias")):
        return "qkv"
    if name.endswith(("fc1.weight", "fc1.bias")):
        return "rows"
    if name.endswith(("proj.weight", "fc2.weight")):
        return "cols"
    return "replicated"


def _reference_name(name: str) -> str:
    """Parameter name in :class:`GPT` of :class:`ParallelGPT`'s ``name``."""
    return (name.replace(".attn.qkv.", ".qkv.").replace(".attn.proj.", ".proj.")
            .replace(".mlp.fc1.", ".fc1.").replace(".mlp.fc2.", ".fc2."))


def shard_tensors(reference: Mapping[str, torch.Tensor], c: GPTConfig, t: int, rank: int
                  ) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s slices of a :class:`GPT`'s tensors (parameters or their gradients),
    keyed by :class:`ParallelGPT`'s parameter names."""
    names = [n for n, _ in _parallel_names(c)]
    out = {}
    for name in names:
        full = reference[_reference_name(name)]
        rule = _shard_rule(name)
        if rule == "rows":
            out[name] = full.chunk(t, dim=0)[rank]
        elif rule == "cols":
            out[name] = full.chunk(t, dim=1)[rank]
        elif rule == "qkv":
            heads = full.view(3, c.heads, -1, *full.shape[1:])
            out[name] = heads.chunk(t, dim=1)[rank].reshape(-1, *full.shape[1:])
        else:
            out[name] = full
    return out


def _parallel_names(c: GPTConfig) -> Iterable[tuple[str, None]]:
    yield "wte.weight", None
    yield "wpe.weight", None
    for i in range(c.layers):
        for part in ("ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias",
                     "attn.proj.weight", "attn.proj.bias", "ln2.weight", "ln2.bias",
                     "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"):
            yield f"blocks.{i}.{part}", None
    yield "lnf.weight", None
    yield "lnf.bias", None


def load_shard(model: ParallelGPT, reference: GPT) -> None:
    """Copy this rank's slices of ``reference``'s parameters into ``model``."""
    t, rank = _size(model.group), _rank(model.group)
    shard = shard_tensors(dict(reference.named_parameters()), model.config, t, rank)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(shard[name])


def finish_gradients(model: nn.Module, tensor_group: Group = None,
                     data_group: Group | None = None) -> None:
    """After backward: sum the sequence-parallel parameters' partial gradients over the
    tensor group (Korthikanti et al. §4.2.2), then average every gradient over the data
    group (data parallelism, when ``data_group`` has more than one rank)."""
    partial = [p.grad for p in model.parameters()
               if p.grad is not None and getattr(p, "sequence_parallel", False)]
    if partial and _size(tensor_group) > 1:
        _all_reduce_flat(partial, tensor_group)  # one coalesced all-reduce, as Megatron
    if data_group is not None and _size(data_group) > 1:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        _all_reduce_flat(grads, data_group, 1 / _size(data_group))


def _all_reduce_flat(grads: list[torch.Tensor], group: Group, scale: float = 1.0) -> None:
    """Sum ``grads`` over ``group`` through one flat buffer, times ``scale``, in place."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    _all_reduce_(flat, group)
    if scale != 1.0:
        flat *= scale
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def grid_sizes(world_size: int, t: int, p: int = 1) -> tuple[int, int, int]:
    """``(t, p, d)`` for ``world_size`` ranks, with a one-line error when it does not fit
    (``p > 1`` trains on the pipeline runtime: :mod:`backends.megatron`)."""
    grid = megatron_groups(world_size, t, p)
    return grid.t, grid.p, grid.d


def batch_shard(tokens: torch.Tensor, d: int, dp_rank: int) -> torch.Tensor:
    """This data-parallel replica's ``1/d`` of a batch (dim 0)."""
    if tokens.shape[0] % d:
        raise ValueError(f"batch {tokens.shape[0]} does not split over {d} data-parallel "
                         "replicas")
    return tokens.chunk(d, dim=0)[dp_rank]


def lm_batch(c: GPTConfig, batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic language-modelling batch: tokens ``[batch, s]`` and the next tokens."""
    gen = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, c.vocab, (batch, c.seq + 1), generator=gen)
    return seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()


def train_step(model: ParallelGPT, optimizer: torch.optim.Optimizer, tokens: torch.Tensor,
               targets: torch.Tensor, data_group: Group | None = None) -> float:
    """One iteration on this replica's batch: forward, loss, backward, gradient finishing,
    optimizer step; returns the loss (nats)."""
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(tokens, targets)
    loss.backward()  # type: ignore[no-untyped-call]
    finish_gradients(model, model.group, data_group)
    optimizer.step()
    return float(loss.detach())


def gpt_parameters(c: GPTConfig) -> int:
    """Parameters of the (unsharded) GPT."""
    h = c.hidden
    return c.vocab * h + c.seq * h + c.layers * (12 * h * h + 13 * h) + 2 * h

