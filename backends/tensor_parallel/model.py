"""A small GPT, unsharded (:class:`GPT`, the reference) and tensor-parallel
(:class:`ParallelGPT`, Megatron's layout), with the word embedding tied to the output layer.

With ``sequence_parallel`` (Korthikanti et al. 2022, §4.2.2) the layer norms and dropouts run
on ``s/t`` of the sequence; the replicated parameters that then see only part of it are
marked, and :func:`backends.tensor_parallel.training.finish_gradients` sums their gradients.
Activations inside :class:`ParallelGPT` are ``[s, b, h]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from backends.device import on_device
from backends.tensor_parallel.communication import _all_gather, _size, _split
from backends.tensor_parallel.cross_entropy import vocab_parallel_cross_entropy
from backends.tensor_parallel.groups import Group
from backends.tensor_parallel.layers import (
    ParallelMLP,
    ParallelSelfAttention,
    VocabParallelEmbedding,
    _mark_sequence_parallel,
    _per_rank,
)
from backends.tensor_parallel.operators import (
    copy_to_tensor_parallel,
    gather_from_sequence_parallel,
)


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
    for the split regions); the parity tests use dropout 0. Built on the CPU, then moved to the
    rank's device (:func:`backends.device.device`), so every device starts from the same
    weights.
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
        on_device(self)

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


def gpt_parameters(c: GPTConfig) -> int:
    """Parameters of the (unsharded) GPT."""
    h = c.hidden
    return c.vocab * h + c.seq * h + c.layers * (12 * h * h + 13 * h) + 2 * h
