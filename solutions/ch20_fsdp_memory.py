"""Chapter 20 exercise, reference answer: the most bytes one FSDP rank holds during a step.

See ``exercises/ch20_fsdp_memory.py`` for the task. fp32 throughout, activations left out:
what a rank keeps between steps plus the most the step allocates at once.
"""

from __future__ import annotations

import itertools

OPTIMIZER_BYTES = {"adam": 8, "momentum": 4, "sgd": 0}
"""fp32 optimizer state per parameter, bytes."""


def shard(numel: int, world: int) -> int:
    """A rank's shard of a unit of ``numel`` parameters: ``⌈numel/world⌉`` elements."""
    return -(-numel // world)


def peak_bytes(unit_numels: list[int], world: int, reshard_after_forward: bool = True,
               prefetch: bool = True, optimizer: str = "adam") -> int:
    """Peak bytes of one rank of FSDP in one fp32 step (activations not counted)."""
    if world < 1 or not unit_numels or min(unit_numels) < 1 or optimizer not in OPTIMIZER_BYTES:
        raise ValueError("need world ≥ 1, at least one unit of ≥ 1 parameter and a known "
                         "optimizer")
    shards = [shard(n, world) for n in unit_numels]
    full = [4 * s * world for s in shards]  # each unit gathered: padded, fp32
    held = sum(shards) * (4 + 4 + OPTIMIZER_BYTES[optimizer]) + max(full)
    n = len(full)
    if reshard_after_forward:
        ahead = [full[i] + (full[i + 1] if prefetch and i + 1 < n else 0) for i in range(n)]
        behind = [full[i] + (full[i - 1] if prefetch and i > 0 else 0) for i in range(n)]
        forward = max(ahead)
        backward = max(behind[i] + 4 * unit_numels[i] for i in range(n))
    else:  # every unit stays gathered from its forward to its backward
        forward = sum(full)
        backward = max(sum(full[:i + 1]) + 4 * unit_numels[i] for i in range(n))
    temporaries = 1 if optimizer == "adam" else 0  # √v, then √v/c: two, one freed at once
    sizes = [0] + [4 * s for s in shards]
    update = temporaries * max(2 * b + a for a, b in itertools.pairwise(sizes))
    return held + max(forward, backward, update)
