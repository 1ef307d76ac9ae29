"""Rank programs for the FSDP tests: one spawn per world size runs every case and returns plain
numbers (parity with ``fully_shard``, the log of all-gathers, peak bytes)."""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.distributed as dist

from backends.fsdp.measure import gather_log, parity, time_step
from lab.models import mlp

WIDTHS = (4, 7, 5, 3)
"""Units of 35, 40 and 18 parameters: at worlds 2, 3 and 4 some unit needs padding."""
CASES = [{"optimizer": o, "mixed": m, "reshard": r, "prefetch": p}
         for o, m, r, p in [("adam", False, True, True), ("sgd", False, False, True),
                            ("adam", True, True, True), ("sgd", True, False, True),
                            ("sgd", False, True, False), ("adam", False, False, True),
                            ("sgd", False, True, True)]]
"""Adam (weight decay) and SGD (momentum), fp32 and bf16/fp32 mixed precision, resharding
after forward or not, prefetching or not; the one-rank teams run the first four only."""

MEMORY_WIDTHS = (97, 161, 143, 128)
"""Units of 15 778, 23 166 and 18 432 parameters (not divisible by 3 or 4)."""
MEMORY_BATCH = 5
MEMORY_CONFIGS = [(True, True, False), (False, True, False), (True, False, False),
                  (True, True, True)]
"""(reshard_after_forward, prefetch, mixed) of each peak measured."""


def run_all(logs: bool, memory: bool) -> dict[str, Any]:
    """Rank program: parity of every case on the whole world and, at world 4, on the teams of
    1 (each rank alone) and 3 (ranks 0–2) too; the gather logs (``logs``) and the peaks
    (``memory``) on the world."""
    torch.manual_seed(0)
    features = (WIDTHS[0], WIDTHS[-1])
    out: dict[str, Any] = {"parity": {dist.get_world_size(): parity(mlp(WIDTHS), features,
                                                                    CASES)}}
    if dist.get_world_size() == 4:
        alone = [dist.new_group([r]) for r in range(4)]
        three = dist.new_group([0, 1, 2])
        out["parity"][1] = parity(mlp(WIDTHS), features, CASES[:4],
                                  group=alone[dist.get_rank()])
        if dist.get_rank() < 3:
            out["parity"][3] = parity(mlp(WIDTHS), features, CASES, group=three)
    if logs:
        out["logs"] = {(r, p): gather_log(mlp(WIDTHS), features, r, p)
                       for r, p in itertools.product((True, False), (True, False))}
    if memory:
        out["peaks"] = {c: time_step(mlp(MEMORY_WIDTHS), (MEMORY_WIDTHS[0], MEMORY_WIDTHS[-1]),
                                     MEMORY_BATCH, 1, *c, pytorch=False)["peak_bytes"]
                        for c in MEMORY_CONFIGS}
    return out
