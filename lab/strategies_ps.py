"""The parameter server as strategy twins (book chapter 3): ``ps.bsp``, ``ps.ssp``, ``ps.async``.

PS-Lite's roles on ``1 + S + W`` local processes — a scheduler, ``S`` servers holding the key
ranges, ``W`` workers that pull, compute a gradient and push — under each consistency model of
the chapter: bulk synchronous (BSP: a push is answered once the iteration's update is applied),
bounded delay (SSP, τ = :data:`TAU`: iteration ``t`` waits for every worker's ``t − τ``) and
asynchronous (never waits). The real twin is :mod:`backends.parameter_server`, the simulated
twin :mod:`simulator.parameter_server`.

**World** is the number of workers ``W``, the replicas that data-parallel training adds (as the
world of ``data_parallel`` is its replicas); the sweep's **parameter** is the number of servers
``S``, so that ``--world`` × ``servers`` is the chapter's grid of servers × workers (the server
bottleneck as workers are added, relieved by more servers). A run starts ``1 + S + W`` processes.

Each point predicts the time per iteration (s, median over workers and iterations after the
warm-up) — :func:`lab.parameter_server.predict`, from the calibration, the code's costs
measured on one process (:func:`lab.parameter_server.profile_costs`), a gradient profiled on one
process (:func:`lab.parameter_server.profile_compute`) and the measured extra of a receive from
any source (:func:`lab.parameter_server.measure_anysource`), never from a run of the parameter
server — in two tiers: **textbook**, the messages on
:func:`simulator.host.factory.textbook_cluster` (α, B, the shared bus), and **host**, on the
calibrated host with its measured effects; both with the roles sharing the host's cores. It
measures the real twin's, each of ``repeats`` runs launched together
(:func:`backends.parameter_server.train.run_scenarios`, as ``benchmarks/ps_accuracy.py`` does):
median, p10 and p90 over the runs of each run's time per iteration.

The prediction reads the calibration at ``1 + S + W`` ranks, which ``distml-lab compare``
calibrates first (the twin's ``ranks``); called without one, the largest calibrated world below
it is used (``calibration_world`` in each row; a line on stderr says so). Rows also carry the
trained model (``trained_model``), the consistency model and τ, and the idle time, largest
staleness and throughput (examples/s), predicted (of the host tier where it was predicted) and
measured.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lab.strategies import StrategyTwin, register
from lab.timelines import ps_timeline
from simulator.core.calibration import Calibration, CalibrationError
from simulator.host.factory import shown_tier

MODEL = "mlp"
"""The model trained: the small dense MLP (:attr:`backends.parameter_server.PSConfig.mlp_sizes`),
whose every key each worker pulls and pushes per iteration."""

ITERATIONS = 20
"""Iterations per run (the first two are warm-up, left out of the time per iteration)."""

TAU = 2
"""The bounded delay of ``ps.ssp`` (the chapter's example)."""

LR = 0.1
"""The servers' SGD learning rate."""


def config(consistency: str, servers: int, workers: int) -> Any:
    """The :class:`~backends.parameter_server.PSConfig` of one point."""
    from backends.parameter_server import PSConfig

    return PSConfig(servers=servers, workers=workers, model=MODEL, consistency=consistency,
                    tau=TAU if consistency == "ssp" else 0, iterations=ITERATIONS, lr=LR)


def calibration_entry(processes: int, calibration: Calibration) -> Any:
    """The calibration at ``processes`` ranks, else the largest calibrated world below it (the
    CLI calibrates the workers' world); raises the lookup's error when there is none."""
    for world in range(processes, 1, -1):
        try:
            entry = calibration.entry(world, "gloo")
        except CalibrationError:
            continue
        if world != processes:
            print(f"no calibration at {processes} ranks: using world {world}'s (run "
                  f"'distml-lab calibrate --world {processes}' for the exact one)",
                  file=sys.stderr)
        return entry
    return calibration.entry(processes, "gloo")


def measure(cfg: Any, repeats: int) -> list[Any]:
    """``repeats`` runs of ``cfg`` in one launch of ``1 + S + W`` processes: each run's
    :class:`~backends.parameter_server.train.PSResult`."""
    from backends.launch import spawn
    from backends.parameter_server.train import collect, run_scenarios

    cfg.validate()
    outs = spawn(run_scenarios, 1 + cfg.servers + cfg.workers, [cfg] * repeats,
                 backend="gloo", timeout=60, deadline=60 + 10 * repeats)
    return [collect(cfg, [o[i] for o in outs]) for i in range(repeats)]


def spread(samples: Sequence[float]) -> dict[str, float]:
    """Median, p10 and p90 of ``samples``, s."""
    q = (statistics.quantiles(samples, n=10, method="inclusive") if len(samples) > 1
         else list(samples) * 9)
    return {"median_s": statistics.median(samples), "p10_s": q[0], "p90_s": q[-1]}


def _point(consistency: str, servers: int, workers: int) -> dict[str, Any]:
    """The fields that say which point a row is, predicted or measured alike."""
    cfg = config(consistency, servers, workers)
    return {"bytes": 4 * cfg.num_keys(), "servers": servers, "workers": workers,
            "processes": 1 + servers + workers, "trained_model": MODEL,
            "consistency": consistency, "tau": cfg.tau}


def _twin(consistency: str) -> tuple[Any, Any]:
    """The :data:`~lab.strategies.Predict` and :data:`~lab.strategies.Measure` of one
    consistency model: ``world`` workers, one row per number of servers in ``points``."""
    def predict(world: int, points: Sequence[Any], calibration: Calibration,
                models: Sequence[str]) -> list[dict[str, Any]]:
        """The code's costs once, a gradient and the any-source receive per point, then each
        tier."""
        from lab.parameter_server import (
            measure_anysource,
            profile_compute,
            profile_costs,
        )
        from lab.parameter_server import predict as simulate

        costs = profile_costs()
        anysource: dict[int, float] = {}
        rows = []
        for servers in points:
            cfg = config(consistency, servers, world)
            processes = 1 + servers + world
            entry = calibration_entry(processes, calibration)
            if processes not in anysource:
                anysource[processes] = measure_anysource(processes)
            compute = profile_compute(cfg)
            tiers = {model: simulate(cfg, entry, replace(costs, anysource_s=anysource[processes]),
                                     compute, model=model) for model in models}
            chosen = tiers[shown_tier(tiers)]
            rows.append({"predicted": {m: t.time_per_iteration_s() for m, t in tiers.items()},
                         **_point(consistency, servers, world),
                         "calibration_world": entry.world_size,
                         "predicted_idle_s": chosen.idle_time_s(),
                         "predicted_max_staleness": int(chosen.staleness.max()),
                         "predicted_throughput": chosen.throughput(cfg.batch_size)})
        return rows

    def measure_(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
        """``repeats`` runs of each point, launched together."""
        rows = []
        for servers in points:
            runs = measure(config(consistency, servers, world), repeats)
            rows.append({**spread([r.time_per_iteration_s for r in runs]),
                         **_point(consistency, servers, world),
                         "measured_idle_s": statistics.median(r.idle_time_s for r in runs),
                         "measured_max_staleness": max(r.max_staleness for r in runs),
                         "measured_throughput": statistics.median(r.throughput for r in runs)})
        return rows

    return predict, measure_


SUMMARIES = {"bsp": "bulk synchronous: a push is answered once every worker's update of the "
                    "iteration is applied",
             "ssp": f"bounded delay (SSP, tau={TAU}): iteration t waits for every worker's "
                    f"t - tau",
             "async": "asynchronous: pushes applied on arrival, no worker ever waits"}


def _register(consistency: str, text: str) -> StrategyTwin:
    predict, measure_ = _twin(consistency)
    return register(StrategyTwin(
        name=f"ps.{consistency}", chapter="3",
        summary=f"parameter server (S servers, world = W workers), {text}",
        parameter="servers", points=(1, 2), quick_points=(1,), predict=predict,
        measure=measure_, worlds=(2, 3), quick_worlds=(2,), min_world=1, max_world=4,
        world_unit="workers", ranks=lambda workers, servers: 1 + servers + workers,
        timeline=ps_timeline(consistency)))


TWINS = {consistency: _register(consistency, text) for consistency, text in SUMMARIES.items()}
