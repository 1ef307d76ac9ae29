"""Small models the lab's side-by-side experiments train (DataParallel, DDP, ZeRO, RPC): seeded,
so every process that builds one gets the same weights."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch
from torch import nn


def mlp(widths: Sequence[int], seed: int = 0,
        activation: Callable[[], nn.Module] = nn.Tanh) -> nn.Sequential:
    """``Linear`` layers ``widths[0] → widths[1] → …`` with ``activation()`` between them (none
    after the last), float32, seeded."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), activation()]
    return nn.Sequential(*layers[:-1])


def parameter_count(widths: Sequence[int]) -> int:
    """Parameters of :func:`mlp` (weights and biases)."""
    return sum(a * b + b for a, b in itertools.pairwise(widths))
