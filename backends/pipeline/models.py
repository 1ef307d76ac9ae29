"""Small sequential models for the pipeline lab: easy to cut, cheap to run on a CPU.

:func:`mlp` is a stack of identical residual-free feed-forward *blocks*
``Linear(d, h) → GELU → Linear(h, d)`` — the MLP half of a transformer layer. Each block is one
"layer" of the ``nn.Sequential`` a balance cuts. A block saves its input, its hidden
pre-activation and the GELU's output for backward (``(d + 2h)`` floats per example), and no
tensor is shared between blocks, so per-block activation sizes add up exactly to a stage's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def block(width: int, hidden: int) -> nn.Sequential:
    """One feed-forward block ``Linear(width, hidden) → GELU → Linear(hidden, width)``."""
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))


def mlp(layers: int, width: int, hidden: int | Sequence[int] | None = None,
        seed: int = 0) -> nn.Sequential:
    """``layers`` blocks, initialised from ``seed`` (every rank builds the same model).

    ``hidden`` is one hidden width for every block (default ``4 · width``) or one per block —
    an uneven model, whose balance matters.
    """
    hiddens = ([hidden or 4 * width] * layers if hidden is None or isinstance(hidden, int)
               else list(hidden))
    if layers < 1 or width < 1 or len(hiddens) != layers or min(hiddens) < 1:
        raise ValueError(f"an MLP needs at least one layer, a width and one hidden width per "
                         f"layer, got {layers} layers, width {width}, hidden {hidden}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(*(block(width, h) for h in hiddens))
