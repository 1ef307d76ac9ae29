"""Chapter 3, reference answer 3.1: the bounded-delay (SSP) wait in the worker.

The exercise is in ``exercises/ch03_bounded_delay.py``; the lab's own version is
``backends.parameter_server.train.bounded_delay_wait``.
"""

from __future__ import annotations

from typing import Any


def bounded_delay_wait(kv: Any, iteration: int, tau: int) -> None:
    """Block until every worker has pushed ``iteration − tau`` iterations (no wait if ≤ 0)."""
    need = iteration - tau
    if need > 0:
        kv.wait(kv.clock(need))
