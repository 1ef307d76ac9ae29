"""Activation checkpointing modes, as torchgpipe names them.

Checkpointing (re-materialisation, GPipe §2.3; Chen et al. 2016) keeps only a stage's *input*
during the forward pass and recomputes the rest of the activations just before the backward
pass: memory for time. torchgpipe (Kim et al. 2020, §3.4) checkpoints the first
``checkpoint_stop`` micro-batches of every partition:

* ``always`` — every micro-batch (``checkpoint_stop = m``);
* ``except_last`` — all but the last (``m − 1``), torchgpipe's default: the last micro-batch's
  backward starts right after its forward, so recomputing it would only cost time;
* ``never`` — none (``0``).

We checkpoint with :func:`torch.utils.checkpoint.checkpoint` (non-reentrant), which saves the
input, drops the intermediate activations and recomputes them inside the backward pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

CHECKPOINT_MODES = ("always", "except_last", "never")


def checkpoint_stop(mode: str, microbatches: int) -> int:
    """How many leading micro-batches are checkpointed under ``mode``."""
    if mode not in CHECKPOINT_MODES:
        raise ValueError(f"checkpoint mode must be one of {', '.join(CHECKPOINT_MODES)}, "
                         f"got {mode!r}")
    return {"always": microbatches, "except_last": microbatches - 1, "never": 0}[mode]


def run(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
        checkpointed: bool) -> torch.Tensor:
    """``module(x)``, checkpointed or not."""
    if checkpointed:
        out = checkpoint(module, x, use_reentrant=False)
        assert isinstance(out, torch.Tensor)
        return out
    return module(x)
