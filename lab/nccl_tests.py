"""nccl-tests' bandwidth conventions, so our numbers read like everyone else's.

NCCL's benchmark suite (``nccl-tests``, doc/PERFORMANCE.md) reports two bandwidths for a
collective that took ``t`` seconds on ``S`` bytes:

* **algbw** = S / t — what the application sees;
* **busbw** = algbw × factor — the bandwidth each rank's link actually carried, comparable with
  the hardware's peak and across world sizes. The factor counts how much each rank must send:
  all-reduce 2(p−1)/p (a reduce-scatter then an all-gather); reduce-scatter, all-gather and
  all-to-all (p−1)/p; broadcast, reduce (and point-to-point) 1.

For all-gather and reduce-scatter ``S`` is the *whole* buffer (count per rank × dtype size × p),
which is how this lab defines ``nbytes`` for them too.
"""

from __future__ import annotations

from collections.abc import Callable

BUSBW_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda p: 2 * (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "all_to_all": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
    "reduce": lambda p: 1.0,
    "scatter": lambda p: (p - 1) / p,
    "gather": lambda p: (p - 1) / p,
}
"""Operation name → busbw factor as a function of the world size ``p``."""


def algbw_GBps(nbytes: int, seconds: float) -> float:
    """S / t in GB/s (10^9 bytes per second, as nccl-tests prints)."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def busbw_GBps(operation: str, world: int, nbytes: int, seconds: float) -> float:
    """algbw × the operation's factor, GB/s (``operation`` without one: algbw)."""
    factor = BUSBW_FACTORS[operation](world) if operation in BUSBW_FACTORS else 1.0
    return algbw_GBps(nbytes, seconds) * factor
