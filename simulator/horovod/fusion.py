"""Tensor fusion: Horovod's rule for packing ready tensors into one fused all-reduce.

Twin of :mod:`backends.horovod.fusion` (the real engine's packing); book chapter 7, "The
fusion framework"; Horovod ``horovod/common/controller.cc``, ``Controller::FuseResponses``.

The controller turns the tensors that every rank has ready into a list of single-tensor
*responses*, in the agreed order, then fuses them. Walking the list from the front, a fused
response starts with the first tensor left and takes each following one while it is

* of the same operation (all-reduce with all-reduce), the same dtype and scaling, and
* small enough that the fused total stays ``≤ threshold`` bytes.

A tensor that does not fit is *skipped* (it stays in the list, in its place, for a later
response) and the walk looks further ahead, as long as the skipped bytes plus the fused bytes
still fit under the threshold: mixed precision interleaves fp16 and fp32 gradients, and without
the look-ahead every fused group would break in two. When the skipped bytes no longer fit, the
response is closed. A single tensor larger than the threshold is reduced alone, and a
threshold of 0 turns fusion off (every response carries one tensor)::

    sizes 4 4 4 4 (MB), threshold 10 MB      → [4 4] [4 4]
    fp32 4, fp16 2, fp32 4, threshold 10 MB  → [fp32 4, fp32 4] [fp16 2]   (look-ahead)

Units: bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Response:
    """One tensor that every rank has ready, as the controller lists it.

    Attributes:
        name: the tensor's name (``allreduce.fc1.weight``).
        nbytes: its size, bytes.
        dtype: its element type (``float32``); only equal dtypes fuse.
        op: the collective (``allreduce``); only equal operations fuse.
        scale: the pre/post-scaling it asks for; only equal scalings fuse.
    """

    name: str
    nbytes: int
    dtype: str = "float32"
    op: str = "allreduce"
    scale: float = 1.0


FUSION_BUFFER_ATOMIC_UNIT = 64
"""Horovod sizes the fusion buffer in multiples of ``local_size × 8 B × 64``."""


def effective_threshold(threshold_bytes: int, local_size: int) -> int:
    """The threshold the engine really uses, bytes: rounded up to a multiple of
    ``local_size × 8 × 64`` bytes so that the buffer splits evenly among a machine's ranks
    (Horovod's ``Controller::TensorFusionThresholdBytes``); 0 stays 0 (fusion off)."""
    unit = max(local_size, 1) * 8 * FUSION_BUFFER_ATOMIC_UNIT
    return -(-threshold_bytes // unit) * unit


def _fits_with(first: Response, other: Response) -> bool:
    return (first.op, first.dtype, first.scale) == (other.op, other.dtype, other.scale)


def fuse_responses(responses: Sequence[Response], threshold_bytes: int
                   ) -> list[list[Response]]:
    """Group ``responses`` (agreed order) into fused responses, ``FuseResponses``' way.

    Returns the fused responses in execution order, each a list of the tensors it packs into
    the fusion buffer, in buffer order. Every input appears exactly once.
    """
    if threshold_bytes < 0:
        raise ValueError(f"the fusion threshold must be ≥ 0 bytes, got {threshold_bytes}")
    if any(r.nbytes < 0 for r in responses):
        raise ValueError("a tensor cannot have a negative size")
    queue = list(responses)
    fused: list[list[Response]] = []
    while queue:
        first = queue.pop(0)
        group, size = [first], first.nbytes
        skipped: list[Response] = []
        skipped_size = 0
        while queue:
            new = queue[0]
            if _fits_with(first, new) and size + new.nbytes <= threshold_bytes:
                group.append(queue.pop(0))
                size += new.nbytes
                continue
            skipped_size += new.nbytes
            if size + skipped_size > threshold_bytes:
                break
            skipped.append(queue.pop(0))
        queue[:0] = skipped  # skipped tensors go back to the front, in their order
        fused.append(group)
    return fused
