"""The Reducer's bucket assignment, a pure function shared by both DDP twins.

Parameters in *reverse* registration order (the order backward produces their gradients), a
bucket closes once it holds ``≥ cap`` bytes; the first bucket's cap may be smaller (PyTorch:
1 MiB when ``bucket_cap_mb`` is left at its default, else the cap). Li et al., "PyTorch
Distributed", VLDB 2020, §3.2; :mod:`backends.ddp` uses the same function.

Units: bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

MiB = 2**20
DEFAULT_BUCKET_CAP_BYTES = 25 * MiB
"""PyTorch's ``bucket_cap_mb=25`` (MiB, as PyTorch counts it)."""
DEFAULT_FIRST_BUCKET_BYTES = 1 * MiB
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: the first bucket's cap by default."""


def bucket_caps(bucket_cap_mb: float | None) -> tuple[int, int]:
    """``(bucket_cap_bytes, first_bucket_bytes)`` as PyTorch derives them from ``bucket_cap_mb``.

    Left at its default (``None``) the cap is 25 MiB and the first bucket 1 MiB; a cap given
    explicitly applies to the first bucket too (``torch/nn/parallel/distributed.py``,
    ``_BucketCapacityConfig.create``).
    """
    if bucket_cap_mb is None:
        return DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES
    if not bucket_cap_mb > 0:
        raise ValueError(f"bucket_cap_mb must be > 0, got {bucket_cap_mb}")
    cap = int(bucket_cap_mb * MiB)
    return cap, cap


def assign_buckets(param_sizes: Sequence[int], bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
                   first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES,
                   dtypes: Sequence[str] | None = None) -> list[list[int]]:
    """Group parameters into buckets, the Reducer's way; return lists of parameter indices.

    ``param_sizes[i]`` is the size in bytes of parameter ``i`` in *registration* order
    (``module.parameters()``). Parameters are taken in reverse order — the order backward
    produces their gradients — and appended to the open bucket of their dtype (a bucket is one
    flat buffer, so one dtype). A bucket closes as soon as it holds at least its cap: the first
    bucket of each dtype ``first_bucket_bytes``, later ones ``bucket_cap_bytes``. A parameter
    is never split, so a bucket may exceed its cap by less than one parameter. Buckets still
    open at the end follow, in the order their dtypes first appeared. Bucket 0 is all-reduced
    first. Example, four 1 MiB parameters, caps 2 MiB and first 1 MiB::

        assign_buckets([M, M, M, M], 2 * M, M) == [[3], [2, 1], [0]]

    Mirrors ``compute_bucket_assignment_by_size`` of ``torch/csrc/distributed/c10d/
    reducer.cpp`` as PyTorch uses it after its first iteration, when it rebuilds the buckets
    in the order gradients arrived.
    """
    if bucket_cap_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError(f"bucket caps must be > 0 bytes, got {bucket_cap_bytes} and "
                         f"{first_bucket_bytes}")
    if dtypes is not None and len(dtypes) != len(param_sizes):
        raise ValueError(f"{len(dtypes)} dtypes for {len(param_sizes)} parameters")
    if any(size < 0 for size in param_sizes):
        raise ValueError("a parameter cannot have a negative size")
    buckets: list[list[int]] = []
    open_: dict[str, list[int]] = {}
    filled: dict[str, int] = {}
    cap: dict[str, int] = {}
    for i in reversed(range(len(param_sizes))):
        key = dtypes[i] if dtypes is not None else ""
        open_.setdefault(key, []).append(i)
        filled[key] = filled.get(key, 0) + param_sizes[i]
        if filled[key] >= cap.setdefault(key, first_bucket_bytes):
            buckets.append(open_.pop(key))
            filled[key], cap[key] = 0, bucket_cap_bytes
    buckets += [b for b in open_.values() if b]
    return buckets
