"""Who talks to whom: the pure shapes behind the chapter-2 algorithms (no messages, no torch).

Both twins build their peers from these functions, so the simulated and the real algorithm
contact the same ranks in the same order.

* :class:`Fold` — MPICH's way to run a power-of-two algorithm on any ``p`` (Thakur,
  Rabenseifner & Gropp 2005): with ``p' = 2^⌊lg p⌋`` and ``extra = p − p'``, the first
  ``2·extra`` ranks pair up; each odd one hands its data to its even partner and sits out, the
  ``p'`` survivors run the algorithm under new ranks ``0..p'−1``, then partners get the result::

      p = 6, p' = 4, extra = 2      rank     0  1  2  3  4  5
                                    new rank 0  -  1  -  2  3

* :func:`binary_tree` — the in-order binary tree NCCL builds (``ncclGetBtree`` in
  ``src/graph/trees.cc``): rank ``r`` with lowest set bit ``b`` has parent ``(r ^ b) | 2b`` (or
  ``r ^ b`` when that is out of range); odd ranks are leaves, the root 0 has a single child::

      p = 14:   0 ─── 8
                    ┌─┴──────┐
                    4        12
                  ┌─┴─┐     ┌─┴─┐
                  2   6    10   13
                 ┌┴┐ ┌┴┐   ┌┴┐
                 1 3 5 7   9 11

* :func:`double_binary_tree` — Sanders, Speck & Träff 2009 as NCCL builds it
  (``ncclGetDtree``): the second tree is the first one mirrored (``r → p−1−r``, ``p`` even) or
  shifted by one (``r → r+1``, ``p`` odd), so a rank that is a leaf in one tree is an inner node
  of the other.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fold:
    """Folding ``world_size`` ranks onto the largest power of two ``size`` not above it.

    ``size`` (``p' = 2^⌊lg p⌋``: how many ranks run the power-of-two algorithm) and ``extra``
    (``p − p'``: how many odd ranks sit out) are worked out once: the real twins consult them
    on every step, and on a host with more ranks than cores each microsecond of a rank's
    Python is paid again by the ranks waiting for a core.
    """

    world_size: int
    size: int = field(init=False)
    extra: int = field(init=False)

    def __post_init__(self) -> None:
        size = 1 << (self.world_size.bit_length() - 1)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "extra", self.world_size - size)

    def new_rank(self, rank: int) -> int | None:
        """Rank among the survivors, or ``None`` for an odd rank that sits out."""
        if rank < 2 * self.extra:
            return None if rank % 2 else rank // 2
        return rank - self.extra

    def old_rank(self, new_rank: int) -> int:
        """The real rank of survivor ``new_rank``."""
        return 2 * new_rank if new_rank < self.extra else new_rank + self.extra

    def blocks(self, new_rank: int) -> range:
        """The real ranks a survivor stands for: itself and, if paired, its odd partner."""
        first = self.old_rank(new_rank)
        return range(first, first + (2 if new_rank < self.extra else 1))


@functools.lru_cache(maxsize=16)
def binary_tree(world_size: int) -> tuple[int | None, ...]:
    """Parent of every rank in NCCL's in-order binary tree rooted at 0 (``None`` at the root).

    One tuple per world size, shared by every rank that asks (``p`` ranks each holding a list
    of ``p`` parents would take memory growing as ``p²``)."""
    parents: list[int | None] = [None]
    for rank in range(1, world_size):
        bit = rank & -rank
        parent = (rank ^ bit) | (bit << 1)
        parents.append(parent if parent < world_size else rank ^ bit)
    return tuple(parents)


@functools.lru_cache(maxsize=16)
def double_binary_tree(world_size: int) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
    """Parents in NCCL's two complementary trees: the binary tree and its mirror/shift."""
    p, first = world_size, binary_tree(world_size)
    if p % 2 == 0:  # mirror: rank r plays the role of p-1-r
        second = [None if (q := first[p - 1 - r]) is None else p - 1 - q for r in range(p)]
    else:  # shift: rank r plays the role of r-1
        second = [None if (q := first[(r - 1) % p]) is None else (q + 1) % p for r in range(p)]
    return first, tuple(second)


def children(parents: Sequence[int | None], rank: int) -> list[int]:
    """The children of ``rank`` in a tree given by its parents, in rank order."""
    return list(_children(tuple(parents)).get(rank, ()))


@functools.lru_cache(maxsize=16)
def _children(parents: tuple[int | None, ...]) -> dict[int, tuple[int, ...]]:
    """Every rank's children, found in one pass over the parents (not one pass per rank)."""
    found: dict[int, list[int]] = {}
    for child, parent in enumerate(parents):
        if parent is not None:
            found.setdefault(parent, []).append(child)
    return {rank: tuple(kids) for rank, kids in found.items()}
