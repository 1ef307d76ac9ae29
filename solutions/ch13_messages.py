"""Chapter 13, reference answer: messages of a split step (exercise in
``exercises/ch13_messages.py``; the simulator's is :func:`simulator.rpc.message_count`)."""

from __future__ import annotations


def message_count(stages: int) -> dict[str, int]:
    """``2k`` forward, ``2k − 1`` gradients, ``2k − 1`` answers, ``2k`` optimizer messages."""
    k = stages
    counts = {"forward": 2 * k, "backward": 2 * k - 1, "acknowledgements": 2 * k - 1,
              "optimizer": 2 * k}
    return {**counts, "total": sum(counts.values())}
