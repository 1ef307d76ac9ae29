"""Chapter 11, reference answer: weight versions stashed by asynchronous PipeDream.

The exercise is in ``exercises/ch11_weight_versions.py``; the simulator's version, with
vertical sync and PipeDream-2BW, is :func:`simulator.pipeline.schedules.pipedream_async`.
"""

from __future__ import annotations


def stashed_versions(stages: int, microbatches: int) -> list[int]:
    """Replay each stage's 1F1B actions and count the versions alive (see the exercise)."""
    counts = []
    for rank in range(stages):
        warmup = min(stages - rank - 1, microbatches)
        actions = [("F", i) for i in range(warmup)]
        for i in range(microbatches - warmup):
            actions += [("F", warmup + i), ("B", i)]
        actions += [("B", i) for i in range(microbatches - warmup, microbatches)]
        current, used, most = 0, {}, 1
        for kind, i in actions:
            if kind == "F":
                used[i] = current  # stash the weights this forward ran with
            else:
                del used[i]  # its backward ran with the stashed copy, now dropped
                current += 1  # the update makes a new version
            most = max(most, len(set(used.values()) | {current}))
        counts.append(most)
    return counts
