"""Chapter 20 exercise, reference answer: the order of FSDP's all-gathers and computes.

See ``exercises/ch20_prefetch.py`` for the task.
"""

from __future__ import annotations


def gather_order(units: int, reshard_after_forward: bool = True, prefetch: bool = True
                 ) -> list[tuple[str, int]]:
    """One step's events: ``("gather", i)`` when unit ``i``'s all-gather is issued,
    ``("forward", i)``/``("backward", i)`` when its compute begins."""
    if units < 1:
        raise ValueError(f"need at least one unit, got {units}")
    log: list[tuple[str, int]] = []
    gathered: set[int] = set()

    def gather(i: int) -> None:
        if 0 <= i < units and i not in gathered:
            gathered.add(i)
            log.append(("gather", i))

    for i in range(units):
        gather(i)
        if prefetch:
            gather(i + 1)
        log.append(("forward", i))
        if reshard_after_forward:
            gathered.discard(i)
    for i in reversed(range(units)):
        gather(i)
        if prefetch:
            gather(i - 1)
        log.append(("backward", i))
        gathered.discard(i)
    return log
