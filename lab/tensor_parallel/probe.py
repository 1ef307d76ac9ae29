"""A probe: collectives alone, back to back, and between computations — the GPT step's
pattern stripped to its bones. :func:`probe_ops` is the predicted side; the rank program that
runs it for real is :func:`backends.tensor_parallel.measure.probe_rank`."""

from __future__ import annotations

from backends.tensor_parallel.point import Op


def probe_ops(nbytes: int, compute_s: float, count: int) -> list[Op]:
    """``count`` × (``compute_s`` of compute, then an all-reduce of ``nbytes`` on the tensor
    group): the GPT step's pattern stripped to its bones."""
    return [op for _ in range(count)
            for op in (("compute", "", compute_s), ("all_reduce", "tensor", float(nbytes)))]
