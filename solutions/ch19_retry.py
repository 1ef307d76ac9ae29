"""Chapter 19, reference answer: the exactly-once rule of closure retry.

The ps side applies each update token ``(closure id, k)`` once (an update from outside any
closure, token ``None``, cannot be retried and is always applied); the coordinator's side
re-queues exactly the dead worker's closures, oldest first. Graded by plugging both into the
twin (:mod:`backends.tf_distribute.ps_strategy`, :mod:`backends.tf_distribute.coordinator`)
and killing a worker mid-closure.
"""

from __future__ import annotations

from collections.abc import Mapping


def apply_once(applied: set[tuple[int, int]], token: tuple[int, int] | None) -> bool:
    """Whether to apply an update carrying ``token``; remembers it in ``applied``."""
    if token is None:
        return True
    if token in applied:
        return False  # a retry's repeat: the dead attempt's update already landed
    applied.add(token)
    return True


def closures_to_retry(in_flight: Mapping[int, int], dead_worker: int) -> list[int]:
    """The dead worker's in-flight closures, in the order they were sent."""
    return [closure for closure, worker in in_flight.items() if worker == dead_worker]
