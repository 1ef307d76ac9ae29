"""A probe: collectives alone, back to back, and between computations — the GPT step's
pattern stripped to its bones."""

from __future__ import annotations

import time

import torch

from lab.tensor_parallel.point import Op


def probe_ops(nbytes: int, compute_s: float, count: int) -> list[Op]:
    """``count`` × (``compute_s`` of compute, then an all-reduce of ``nbytes`` on the tensor
    group): the GPT step's pattern stripped to its bones."""
    return [op for _ in range(count)
            for op in (("compute", "", compute_s), ("all_reduce", "tensor", float(nbytes)))]


def probe_rank(nbytes: int, compute_s: float, count: int, repeats: int) -> dict[str, float]:
    """Rank function: median time of one all-reduce of ``nbytes`` alone (right after a
    barrier), of ``count`` of them back to back, and of :func:`probe_ops` run for real (a busy
    loop of ``compute_s`` before each all-reduce), s."""
    import torch.distributed as dist

    from backends.measure import measure_many

    torch.set_num_threads(1)
    x = torch.zeros(nbytes // 4)

    def alone() -> None:
        dist.all_reduce(x)

    def interleaved() -> None:
        for _ in range(count):
            end = time.perf_counter() + compute_s
            while time.perf_counter() < end:
                pass
            dist.all_reduce(x)

    def back_to_back() -> None:
        for _ in range(count):
            dist.all_reduce(x)

    a, b, c = measure_many([alone, back_to_back, interleaved], repeats=repeats, warmup=3,
                           inner=1)
    return {"alone_s": a.median_s, "back_to_back_s": b.median_s, "interleaved_s": c.median_s}
