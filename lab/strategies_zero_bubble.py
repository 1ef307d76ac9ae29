"""The zero-bubble pipeline schedules as strategy twins (book chapter 23): ``pipeline.zb_h1``,
``pipeline.zbv`` and ``pipeline.dualpipev``.

The world is the number of pipeline ranks, one process each, and the sweep is the number of
micro-batches ``m`` a mini-batch of 64 examples is split into — the knob of the bubble that
ZB-H1 shrinks to ``(p − 1)(T_F + T_I − T_W)`` and ZB-V nearly closes (Qi et al. 2024). The
model is :class:`lab.zero_bubble.ZeroBubbleSetup`'s 8-block MLP (width 256, hidden 1024),
cut into ``p`` (ZB-H1) or ``2p`` (ZB-V, DualPipe-V) equal stages.

Each point predicts from each stage's ``F``, ``I`` and ``W`` timed on one process (one copy
per rank the host's cores run at once; :func:`lab.zero_bubble.profile`) handed to the simulated twin
(:func:`simulator.pipeline.zero_bubble.simulate_zero_bubble`, the ranks sharing the host's
cores) in two tiers: **textbook** (α, B, the shared bus) and **host** (the calibrated cluster
with its measured effects). It measures the real twin
(:class:`backends.pipeline.zero_bubble.ZeroBubblePipeline` on ``world`` processes, median,
p10/p90) with PyTorch's schedule timed beside it where PyTorch defines it
(``builtin_median_s``). Times are one step (every micro-batch's F, I and W), s; ``bytes`` is
the model's parameters. A predicted row adds the bubble and each rank's peak activation bytes
(``predicted_peak_bytes``: the largest), a measured row the measured ones and the bubble of
one traced step (``measured_bubble``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration
from simulator.host.factory import shown_tier

PROFILE_REPEATS = 10
"""Repeats of the one-process stage profile."""


def setups(schedule: str, world: int, points: Sequence[Any]) -> list[Any]:
    """Each point's :class:`lab.zero_bubble.ZeroBubbleSetup`, checked: a one-line error for a
    world or an ``m`` the schedule cannot take."""
    from lab.units import UsageError
    from lab.zero_bubble import ZeroBubbleSetup

    out = []
    for m in points:
        setup = ZeroBubbleSetup(stages=world, microbatches=int(m), schedule=schedule)
        try:
            setup.check()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        out.append(setup)
    return out


def _twin(schedule: str) -> tuple[Any, Any]:
    def predict(world: int, points: Sequence[Any], calibration: Calibration,
                models: Sequence[str]) -> list[dict[str, Any]]:
        """Profile each point's stages once on one process, then simulate it in each tier."""
        from lab.zero_bubble import predict as simulate
        from lab.zero_bubble import profile

        rows = []
        for setup in setups(schedule, world, points):
            costs = profile(setup, PROFILE_REPEATS)
            tiers = {model: simulate(setup, costs, calibration, model) for model in models}
            chosen = tiers[shown_tier(tiers)]
            rows.append({"predicted": {m: r.step_time_s for m, r in tiers.items()},
                         "bytes": _parameter_bytes(setup), "schedule": schedule,
                         "balance": list(setup.balance), "batch": setup.batch,
                         "predicted_bubble": chosen.bubble_fraction,
                         "predicted_peak_activation_bytes": chosen.peak_activation_bytes,
                         "predicted_peak_bytes": max(chosen.peak_activation_bytes)})
        return rows

    def measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
        """Each point's real step on ``world`` processes, PyTorch's beside it."""
        from lab.zero_bubble import measure as run

        rows = []
        for setup in setups(schedule, world, points):
            got = run(setup, repeats)
            timing, builtin = got["timing"], got["builtin"]
            rows.append({"median_s": timing["median_s"], "p10_s": timing["p10_s"],
                         "p90_s": timing["p90_s"], "bytes": _parameter_bytes(setup),
                         "schedule": schedule, "balance": list(setup.balance),
                         "batch": setup.batch,
                         "builtin_median_s": builtin["median_s"] if builtin else None,
                         "measured_peak_activation_bytes": got["peak_activation_bytes"],
                         "measured_peak_bytes": max(got["peak_activation_bytes"]),
                         "measured_bubble": got["bubble"]})
        return rows

    return predict, measure


def _parameter_bytes(setup: Any) -> int:
    """Bytes of the MLP's parameters (fp32)."""
    width, hidden, layers = int(setup.width), int(setup.hidden), int(setup.layers)
    return 4 * layers * (2 * width * hidden + hidden + width)


SUMMARIES = {
    "zb_h1": ("ZB-H1: 1F1B with the backward split into input and weight gradients, the "
              "weight gradients deferred into the cool-down bubble", (4, 8, 16), (4,)),
    "zbv": ("ZB-V: two stages per rank in a V, weight gradients filling the bubbles",
            (4, 8, 16), (4,)),
    "dualpipev": ("DualPipe-V: the V placement, a forward of one chunk paired with a "
                  "backward of the other", (8, 16), (8,)),
}


def _register(schedule: str, summary: str, points: tuple[int, ...],
              quick: tuple[int, ...]) -> StrategyTwin:
    predict, measure = _twin(schedule)
    return register(StrategyTwin(
        name=f"pipeline.{schedule}", chapter="23", summary=summary, parameter="microbatches",
        points=points, quick_points=quick, predict=predict, measure=measure, worlds=(2, 4),
        quick_worlds=(2,), min_world=2, max_world=4))


TWINS = {schedule: _register(schedule, *spec) for schedule, spec in SUMMARIES.items()}
"""One twin per schedule. DualPipe-V needs ``m ≥ 2p``: its points start at 8 (world 4)."""
