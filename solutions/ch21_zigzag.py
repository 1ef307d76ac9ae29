"""Chapter 21 exercise, reference answer: the zig-zag layout and each ring step's causal work.

See ``exercises/ch21_zigzag.py`` for the task.
"""

from __future__ import annotations


def zigzag_chunks(rank: int, world: int) -> tuple[int, int]:
    """The two chunks (of ``2·world``) rank ``rank`` holds, early one first."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"need 0 ≤ rank < world, got rank {rank} of {world}")
    return rank, 2 * world - 1 - rank


def contiguous_chunks(rank: int, world: int) -> tuple[int, int]:
    """The two chunks rank ``rank`` holds when the sequence is split contiguously."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"need 0 ≤ rank < world, got rank {rank} of {world}")
    return 2 * rank, 2 * rank + 1


def step_work(rank: int, world: int, causal: bool = True, layout: str = "zigzag") -> list[int]:
    """``c × c`` sub-blocks rank ``rank`` computes at each ring step ``s = 0 … world−1`` (it
    holds rank ``rank − s``'s keys)."""
    chunks = {"zigzag": zigzag_chunks, "contiguous": contiguous_chunks}
    if layout not in chunks:
        raise ValueError(f"unknown layout {layout!r}")
    mine = chunks[layout](rank, world)
    work = []
    for s in range(world):
        theirs = chunks[layout]((rank - s) % world, world)
        work.append(sum(1 for a in mine for b in theirs if not causal or a >= b))
    return work
