"""Chapter 5, reference answer: DDP's bucket caps (exercise in
``exercises/ch05_bucket_caps.py``; the lab's is :func:`simulator.ddp.bucket_caps`)."""

from __future__ import annotations

MiB = 2**20


def bucket_caps(bucket_cap_mb: float | None) -> tuple[int, int]:
    """25 MiB and a 1 MiB first bucket by default; an explicit cap applies to both."""
    if bucket_cap_mb is None:
        return 25 * MiB, 1 * MiB
    if not bucket_cap_mb > 0:
        raise ValueError(f"bucket_cap_mb must be > 0, got {bucket_cap_mb}")
    cap = int(bucket_cap_mb * MiB)
    return cap, cap
