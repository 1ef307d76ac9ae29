"""Consistency models: when a worker may go on — BSP, SSP with a bounded delay τ, or async.

BSP waits for every worker's push of the iteration to be applied, SSP lets a worker run at most
τ iterations ahead of the slowest (Ho et al. 2013, bounded staleness), async never waits (Li et
al., OSDI 2014, §3: flexible consistency). Both twins ask :func:`required_clock` the clock a
worker waits for.
"""

from __future__ import annotations

from simulator.parameter_server.postoffice import PSConfigError

CONSISTENCY_MODELS = ("bsp", "ssp", "async")


def check_consistency(model: str, tau: int) -> None:
    """``model`` is bsp, ssp or async; τ ≥ 0."""
    if model not in CONSISTENCY_MODELS:
        raise PSConfigError(f"unknown consistency model {model!r}; choose one of "
                            f"{', '.join(CONSISTENCY_MODELS)}")
    if tau < 0:
        raise PSConfigError(f"the bounded delay τ must be >= 0, got {tau}")


def required_clock(model: str, iteration: int, tau: int) -> int | None:
    """The clock an SSP worker waits for before iteration ``t`` (``None``: no wait).

    SSP: every worker must have pushed ``t − τ`` iterations, so the weights it then pulls miss
    at most the last τ iterations of any worker (Ho et al. 2013, bounded staleness). BSP needs
    no clock: its push is answered only once the iteration's update is applied, so the next
    pull sees it. Async never waits.
    """
    if model != "ssp" or iteration - tau <= 0:
        return None
    return iteration - tau
