"""Micro-batches: split a mini-batch along its batch dimension, merge the outputs back.

GPipe (Huang et al. 2019, §2.2) splits each mini-batch of ``N`` examples into ``M``
micro-batches that flow through the pipeline one after another; torchgpipe (Kim et al. 2020,
§3.1 "scatter and gather") does it with ``torch.chunk`` on dimension 0. We use
``torch.tensor_split`` instead, so a batch that ``M`` does not divide is still split into
exactly ``M`` parts, the first ``N mod M`` one example larger — the same rule as
``torch.distributed.pipelining``. Gradient accumulation then weighs each micro-batch's mean
loss by its share ``n_i / N`` of the examples (:func:`loss_weights`), so the accumulated
gradient equals the mini-batch gradient exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def micro_batch_sizes(batch: int, microbatches: int) -> list[int]:
    """Examples in each of ``microbatches`` micro-batches of a ``batch``-example mini-batch."""
    if microbatches < 1:
        raise ValueError(f"need at least 1 micro-batch, got {microbatches}")
    if batch < microbatches:
        raise ValueError(f"cannot split a batch of {batch} examples into {microbatches} "
                         f"micro-batches: every micro-batch needs at least one example")
    base, extra = divmod(batch, microbatches)
    return [base + (i < extra) for i in range(microbatches)]


def split(batch: torch.Tensor, microbatches: int) -> list[torch.Tensor]:
    """``microbatches`` contiguous micro-batches of ``batch`` along dimension 0 (views)."""
    micro_batch_sizes(batch.shape[0] if batch.dim() else 0, microbatches)  # validates
    return [part.contiguous() for part in torch.tensor_split(batch, microbatches, dim=0)]


def merge(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The micro-batches' outputs, concatenated back into one mini-batch (dimension 0)."""
    if not outputs:
        raise ValueError("nothing to merge: no micro-batch outputs")
    return torch.cat(list(outputs), dim=0)


def loss_weights(batch: int, microbatches: int) -> list[float]:
    """``n_i / N`` for each micro-batch: the weight of its mean loss in the mini-batch mean."""
    return [n / batch for n in micro_batch_sizes(batch, microbatches)]
