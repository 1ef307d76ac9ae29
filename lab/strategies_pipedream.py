"""PipeDream's asynchronous 1F1B as a strategy twin (book chapters 10–11): ``pipedream``.

The world is the number of stages, one process each, two MLP blocks (width 256, hidden 1024)
per stage; the sweep is the number of inputs (PipeDream's "minibatches", of 32 examples each)
streamed through the pipeline. With no flush, the pipeline fills once and then runs in steady
state — one forward and one backward per input on every stage, an SGD update after each
backward, weight stashing keeping each input's forward and backward on one version — so the
time grows by one stage's ``forward + backward`` per input after a fill of about ``p`` stages.

Each point predicts the run (:func:`lab.pipedream.predict_pipedream`: schedule ``pipedream`` of
:func:`simulator.pipeline.simulate.simulate_pipeline`, from the one-process profile
:func:`lab.pipedream.profile_pipedream`, with the stage processes sharing the host's cores) in
two tiers: **textbook**, on :func:`simulator.host.factory.textbook_cluster` (α, B, the shared
bus), and **host**, on this machine's calibrated cluster with its measured effects
(:func:`lab.pipeline.local_cluster`). It measures the real
:class:`backends.pipeline.pipedream.PipeDream` on ``world`` processes
(:func:`lab.pipedream.pipedream_rank`, one traced run per repeat after an untraced one, in one
launch): the time from the first span to the last, s, median/p10/p90 over the repeats. Rows add
``balance`` and ``batch``; a predicted row the weight versions each stage was simulated to hold
(of the host tier where it was predicted), a measured row those it held and was planned to hold
(:func:`simulator.pipeline.schedules.pipedream_async`). ``bytes`` is the model's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import pipedream_timeline
from simulator.core.calibration import Calibration
from simulator.host.factory import shown_tier

BLOCKS_PER_STAGE = 2
"""MLP blocks on each stage."""

WIDTH, HIDDEN, BATCH = 256, 1024, 32
"""The blocks (``width → hidden → width``) and the examples per input."""

PROFILE_REPEATS = 10
"""Repeats of the one-process per-layer profile."""


def runs_rank(fields: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Rank function: :func:`lab.pipedream.pipedream_rank` ``repeats`` times; each traced
    run's span from its first span to its last (s), and the last run's versions."""
    from lab.pipedream import pipedream_rank
    from simulator.core.engine import Trace

    spans, out = [], {}
    for _ in range(repeats):
        out = pipedream_rank(fields)
        trace = Trace.from_records(out["trace"])
        spans.append(max(s.end for s in trace) - min(s.start for s in trace))
    return {"spans_s": spans, "versions": out["versions"],
            "planned_versions": out["planned_versions"]}


def pipedream_setup(world: int, minibatches: int) -> Any:
    """The :class:`lab.pipedream.PipeDreamSetup` of one point."""
    from lab.pipedream import PipeDreamSetup

    return PipeDreamSetup(balance=(BLOCKS_PER_STAGE,) * world, width=WIDTH, hidden=HIDDEN,
                          batch=BATCH, minibatches=minibatches)


def _parameter_bytes(setup: Any) -> int:
    """The model's parameters, bytes."""
    model, _, _ = setup.build()
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """The one-process profile once, then every point in each tier."""
    from lab.pipedream import predict_pipedream, profile_pipedream
    from lab.pipeline import host_cores, local_cluster

    clusters = {model: local_cluster(world, calibration, model=model)[0] for model in models}
    layers = profile_pipedream(pipedream_setup(world, points[0]), PROFILE_REPEATS)
    rows = []
    for n in points:
        setup = pipedream_setup(world, n)
        tiers = {model: predict_pipedream(setup, layers, cluster, host_cores())
                 for model, cluster in clusters.items()}
        chosen = tiers[shown_tier(tiers)]
        rows.append({"predicted": {m: r.step_time_s for m, r in tiers.items()},
                     "bytes": sum(x.parameter_bytes for x in layers),
                     "balance": list(setup.balance), "batch": BATCH,
                     "predicted_weight_versions": chosen.weight_versions})
    return rows


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Each point's ``repeats`` runs in one launch."""
    from backends.launch import spawn
    from backends.measure import Timing

    rows = []
    for n in points:
        setup = pipedream_setup(world, n)
        ranks = spawn(runs_rank, world, asdict(setup), repeats, timeout=120.0)
        timing = Timing.from_samples(ranks[0]["spans_s"])
        rows.append({"median_s": timing.median_s, "p10_s": timing.p10_s,
                     "p90_s": timing.p90_s, "bytes": _parameter_bytes(setup),
                     "balance": list(setup.balance), "batch": BATCH,
                     "measured_weight_versions": [r["versions"] for r in ranks],
                     "planned_weight_versions": [r["planned_versions"] for r in ranks]})
    return rows


TWIN = register(StrategyTwin(
    name="pipedream", chapter="10-11", summary="PipeDream: asynchronous 1F1B, no flush, an "
    "update after every backward, weight stashing", parameter="minibatches",
    points=(4, 8, 16, 32), quick_points=(4,), predict=_predict, measure=_measure, worlds=(2, 4),
    quick_worlds=(2,), min_world=2, max_world=4, timeline=pipedream_timeline))
