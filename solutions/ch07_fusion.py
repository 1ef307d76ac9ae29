"""Chapter 7, reference answer: fusion packing (exercise in ``exercises/ch07_fusion.py``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


def fuse_responses(ready: Sequence[tuple[str, str, int]], threshold_bytes: int
                   ) -> list[list[str]]:
    """Group the tensors ready in one cycle into fused all-reduces, in order (Horovod's
    ``FuseResponses``: same dtype, total within the threshold, a bounded look-ahead)."""
    queue = deque(ready)
    groups: list[list[str]] = []
    while queue:
        name, dtype, size = queue.popleft()
        group, aside, skipped = [name], [], 0
        while queue:
            other, other_dtype, nbytes = queue[0]
            if other_dtype == dtype and size + nbytes <= threshold_bytes:
                group.append(other)
                size += nbytes
                queue.popleft()
                continue
            skipped += nbytes
            if size + skipped > threshold_bytes:
                break
            aside.append(queue.popleft())
        queue.extendleft(reversed(aside))
        groups.append(group)
    return groups
