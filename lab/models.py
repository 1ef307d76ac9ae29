"""Small models the lab's side-by-side experiments train (ZeRO, RPC): seeded, so every process
that builds one gets the same weights."""

from __future__ import annotations

import itertools

import torch
from torch import nn


def mlp(widths: tuple[int, ...], seed: int = 0) -> nn.Sequential:
    """``Linear``/``Tanh`` layers ``widths[0] → widths[1] → …`` (no activation at the end)."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


def parameter_count(widths: tuple[int, ...]) -> int:
    """Parameters of :func:`mlp` (weights and biases)."""
    return sum(a * b + b for a, b in itertools.pairwise(widths))
