"""Cutting an unsharded :class:`~backends.tensor_parallel.model.GPT`'s tensors into a rank's
:class:`~backends.tensor_parallel.model.ParallelGPT` slices (the parity tests' reference)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from backends.tensor_parallel.communication import _rank, _size
from backends.tensor_parallel.model import GPT, GPTConfig, ParallelGPT


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
