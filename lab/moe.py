"""Expert parallelism predicted and measured, side by side (book chapter 22).

* :func:`histogram` — the routing histogram of the ranks' groups, from ONE process: the layer
  (:func:`backends.moe.measure.build`, the same weights every rank builds) routes each rank's
  group (:func:`backends.moe.measure.group_tokens`); ``counts[s][e]`` the assignments of group
  ``s`` that expert ``e`` keeps, and the assignments dropped;
* :func:`profile_costs` — each rank's one-core seconds (:class:`simulator.moe.RankCost`),
  measured on one process with one intra-op thread, as each rank runs
  (:func:`backends.moe.measure.profile_costs`): an expert's forward and backward on the rows
  it will get, and the layer's own work besides the experts — the expert-parallel layer at
  world 1 on the rank's group, less its experts;
* :func:`predict_step` — :func:`simulator.moe.simulate_moe_step` with both on this machine's
  calibrated twin in either tier of :func:`simulator.host.factory.local_cluster`, the ranks
  sharing its cores;
* :func:`measure_step` — the real :class:`backends.moe.parallel.ExpertParallelMoE` step on
  ``world`` processes (:func:`backends.moe.measure.time_step`).

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from backends.launch import spawn
from backends.moe.measure import MoEConfig, build, group_tokens, time_step
from backends.moe.measure import profile_costs as profile_one_process
from simulator.core.calibration import Calibration
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster
from simulator.moe import RankCost, busiest_bytes, exchange_bytes, simulate_moe_step

CONFIG = MoEConfig()
"""The twin's layer: ``d = 64``, ``h = 128``, 8 experts, top-2, capacity factor 1.25."""


def histogram(config: MoEConfig, world: int, tokens: int) -> tuple[list[list[int]], int]:
    """``counts[s][e]`` of the ``world`` groups of ``tokens`` and the assignments dropped in
    all of them, routed on this process."""
    layer = build(config)
    counts, dropped = [], 0
    with torch.no_grad():
        for rank in range(world):
            routing = layer.route(group_tokens(config, rank, tokens)[0])
            counts.append([int(n) for n in routing.counts()])
            dropped += routing.dropped
    return counts, dropped


def profile_costs(config: MoEConfig, world: int, tokens: int, counts: list[list[int]],
                  repeats: int = 10) -> list[RankCost]:
    """Each rank's :class:`~simulator.moe.RankCost` for the histogram ``counts``, measured on
    one process (:func:`backends.moe.measure.profile_costs`, one intra-op thread as each rank
    runs)."""
    got = spawn(profile_one_process, 1, config, world, tokens, counts, repeats, timeout=60)[0]
    return [RankCost(**cost) for cost in got]


def predict_step(world: int, tokens: int, calibration: Calibration | str | Path | None = None,
                 models: tuple[str, ...] = ("host",), config: MoEConfig = CONFIG
                 ) -> dict[str, Any]:
    """The predicted step in each tier of ``models`` (``predicted``, s), the bytes the busiest
    rank moves per exchange (``busiest_bytes``) and the assignments dropped
    (``predicted_dropped``), from the one-process histogram and profile only."""
    entry = Calibration.of(calibration).entry(world, "gloo")
    counts, dropped = histogram(config, world, tokens)
    costs = profile_costs(config, world, tokens, counts)
    seconds = {model: simulate_moe_step(local_cluster(entry, world, model, effects=BUSY_HOST),
                                        counts, costs, config.d_model, cores=entry.cores,
                                        trace=False).makespan_s
               for model in models}
    out = exchange_bytes(counts, config.d_model)
    return {"predicted": seconds, "bytes": busiest_bytes(out), "predicted_dropped": dropped}


def measure_step(world: int, tokens: int, repeats: int, config: MoEConfig = CONFIG
                 ) -> dict[str, Any]:
    """The real step on ``world`` processes: median, p10 and p90 of the slowest rank's
    seconds, the bytes the busiest rank moves per exchange (``bytes``, from the routing each
    rank's router decided) and the assignments dropped (``measured_dropped``)."""
    ranks = spawn(time_step, world, config, tokens, repeats, timeout=60)
    samples = sorted(ranks[0]["samples_s"])

    def pct(q: float) -> float:
        return float(samples[min(len(samples) - 1, int(q * len(samples)))])

    return {"median_s": statistics.median(samples), "p10_s": pct(0.1), "p90_s": pct(0.9),
            "bytes": busiest_bytes(exchange_bytes([r["counts"] for r in ranks],
                                                  config.d_model)),
            "measured_dropped": sum(int(r["dropped"]) for r in ranks)}
