"""Chapter 5, reference answer: the Reducer's bucket assignment (exercise in
``exercises/ch05_buckets.py``). The lab's own version, with dtype groups, is
:func:`simulator.ddp.assign_buckets`."""

from __future__ import annotations

from collections.abc import Sequence


def assign_buckets(param_sizes: Sequence[int], bucket_cap_bytes: int,
                   first_bucket_bytes: int) -> list[list[int]]:
    """Buckets of parameter indices in reverse registration order; bucket 0 goes first."""
    if bucket_cap_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError("bucket caps must be > 0 bytes")
    buckets: list[list[int]] = []
    bucket: list[int] = []
    filled, cap = 0, first_bucket_bytes
    for i in reversed(range(len(param_sizes))):  # backward's order: last layer first
        bucket.append(i)
        filled += param_sizes[i]
        if filled >= cap:  # full: it closes with the parameter that filled it
            buckets.append(bucket)
            bucket, filled, cap = [], 0, bucket_cap_bytes
    if bucket:
        buckets.append(bucket)
    return buckets
