"""Chapter 17, reference answer: the ring all-reduce between replica buffers (exercise in
``exercises/ch17_ring_replicas.py``; the lab's own is
:func:`backends.tf_distribute.cross_device_ops.ring_all_reduce`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from simulator.collectives.chunks import chunk_bounds


def transfer(src: Tensor, lo: int, hi: int, device: torch.device) -> Tensor:
    """Elements ``[lo, hi)`` of ``src`` copied to ``device``."""
    return src[lo:hi].to(device, copy=True)


def ring_all_reduce(buffers: Sequence[Tensor]) -> None:
    """Reduce-scatter (add what arrives), then all-gather (keep what arrives)."""
    k = len(buffers)
    bounds = chunk_bounds(buffers[0].numel(), k)
    for s in range(k - 1):
        for r in range(k):
            lo, hi = bounds[(r - s - 1) % k]
            dst = buffers[(r + 1) % k]
            dst[lo:hi].add_(transfer(buffers[r], lo, hi, dst.device))
    for s in range(k - 1):
        for r in range(k):
            lo, hi = bounds[(r - s) % k]
            dst = buffers[(r + 1) % k]
            dst[lo:hi].copy_(transfer(buffers[r], lo, hi, dst.device))
