"""Chapter 10, reference answer: 1F1B's stash per stage (exercise in
``exercises/ch10_stash.py``)."""

from __future__ import annotations


def stashed_microbatches(stages: int, microbatches: int, stage: int) -> int:
    """``min(m, p − s)``: stage ``s`` runs ``p − s`` forwards before its first backward."""
    return min(microbatches, stages - stage)
