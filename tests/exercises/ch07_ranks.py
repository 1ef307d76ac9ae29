"""Rank program for grading exercise 7.1 on real processes: the plan of ``fuse_responses`` run
through the engine's fusion buffer, beside every tensor all-reduced alone."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from backends.horovod.fusion import FusionBuffer
from exercises import load

DTYPES = ("float32", "float64", "int64")


def _tensors(rank: int, count: int, seed: int) -> list[tuple[str, torch.Tensor]]:
    """Mixed-dtype tensors whose values a wrong dtype would change: float64 fractions and
    int64 values above 2**40 lose bits if packed as float32."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        dtype = DTYPES[int(torch.randint(0, 3, (1,), generator=gen))]
        numel = int(torch.randint(1, 300, (1,), generator=gen))
        noise = torch.Generator().manual_seed(seed * 1000 + 17 * i + rank)
        if dtype == "int64":
            t = torch.randint(0, 1000, (numel,), generator=noise) + 2**40 + 1
        else:
            t = (torch.rand(numel, generator=noise, dtype=torch.float64) / 3).to(
                getattr(torch, dtype))
        out.append((f"allreduce.t{i}", t))
    return out


def grade_plan(cases: list[tuple[int, int, int]]) -> dict[str, Any]:
    """For each ``(seed, count, threshold)``: the student's plan, executed group by group
    (several tensors: packed into one buffer, one all-reduce, unpacked; one tensor: in place),
    compared element for element with ``dist.all_reduce`` of each tensor alone."""
    fuse = load("ch07_fusion").fuse_responses
    rank = dist.get_rank()
    problems: list[str] = []
    for seed, count, threshold in cases:
        tensors = _tensors(rank, count, seed)
        ready = [(name, str(t.dtype).removeprefix("torch."), t.numel() * t.element_size())
                 for name, t in tensors]
        try:
            plan = fuse(ready, threshold)
        except NotImplementedError as err:
            return {"todo": str(err)}
        names = [n for group in plan for n in group]
        if sorted(names) != sorted(n for n, _ in tensors):
            problems.append(f"seed {seed}: the plan does not list every tensor exactly once")
            continue
        by_name = dict(tensors)
        expected = {n: t.clone() for n, t in tensors}
        for t in expected.values():
            dist.all_reduce(t)
        buffer = FusionBuffer(threshold)
        for group in plan:
            members = [by_name[n] for n in group]
            if len(members) == 1:
                dist.all_reduce(members[0])
                continue
            flat = buffer.copy_in(members)
            dist.all_reduce(flat)
            FusionBuffer.copy_out(flat, members)
        wrong = [n for n, t in tensors if not torch.equal(t, expected[n])]
        if wrong:
            group = next(g for g in plan if wrong[0] in g)
            kinds = sorted({str(by_name[n].dtype).removeprefix("torch.") for n in group})
            problems.append(f"seed {seed}, threshold {threshold} B: {len(wrong)} tensors differ "
                            f"from all-reducing them alone (first: {wrong[0]}, in a fused "
                            f"group of dtypes {kinds})")
    return {"problems": problems}
