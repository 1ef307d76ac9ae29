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

Each point compares the predicted time per iteration (s, median over workers and iterations
after the warm-up) — :func:`lab.parameter_server.predict`, from the calibration, the code's costs
measured on one process (:func:`lab.parameter_server.profile_costs`), a gradient profiled on one
process (:func:`lab.parameter_server.profile_compute`) and the measured extra of a receive from
any source (:func:`lab.parameter_server.measure_anysource`), never from a run of the parameter
server — with the real twin's, each of ``repeats`` runs launched together
(:func:`backends.parameter_server.train.run_scenarios`, as ``benchmarks/ps_accuracy.py`` does):
median, p10 and p90 over the runs of each run's time per iteration.

The prediction reads the calibration at ``1 + S + W`` ranks, which ``distml-lab compare``
calibrates first (the twin's ``ranks``); called without one, the largest calibrated world below
it is used (``calibration_world`` in each row; a line on stderr says so).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.strategies import StrategyTwin, register, row

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


def calibration_entry(processes: int, calibration: str | Path | None) -> Any:
    """The calibration at ``processes`` ranks, else the largest calibrated world below it (the
    CLI calibrates the workers' world); raises the lookup's error when there is none."""
    from simulator.core.calibration import CalibrationError, find_entry

    for world in range(processes, 1, -1):
        try:
            entry = find_entry(world, "gloo", path=calibration)
        except CalibrationError:
            continue
        if world != processes:
            print(f"no calibration at {processes} ranks: using world {world}'s (run "
                  f"'distml-lab calibrate --world {processes}' for the exact one)",
                  file=sys.stderr)
        return entry
    return find_entry(processes, "gloo", path=calibration)


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


def _comparison(consistency: str) -> Any:
    def compare(world: int, points: Sequence[Any], repeats: int,
                calibration: str | Path | None) -> list[dict[str, Any]]:
        """``world`` workers; one row per number of servers in ``points``."""
        from lab.parameter_server import (
            measure_anysource,
            predict,
            profile_compute,
            profile_costs,
        )

        twin = TWINS[consistency]
        costs = profile_costs()
        anysource: dict[int, float] = {}
        rows = []
        for servers in points:
            cfg = config(consistency, servers, world)
            processes = 1 + servers + world
            entry = calibration_entry(processes, calibration)
            if processes not in anysource:
                anysource[processes] = measure_anysource(processes)
            runs = measure(cfg, repeats)
            predicted = predict(cfg, entry, replace(costs, anysource_s=anysource[processes]),
                                profile_compute(cfg))
            rows.append(row(
                twin, world, servers, predicted.time_per_iteration_s(),
                spread([r.time_per_iteration_s for r in runs]), nbytes=4 * cfg.num_keys(),
                servers=servers, workers=world, processes=processes, model=MODEL,
                consistency=consistency, tau=cfg.tau, calibration_world=entry.world_size,
                predicted_idle_s=predicted.idle_time_s(),
                measured_idle_s=statistics.median(r.idle_time_s for r in runs),
                predicted_max_staleness=int(predicted.staleness.max()),
                measured_max_staleness=max(r.max_staleness for r in runs),
                predicted_throughput=predicted.throughput(cfg.batch_size),
                measured_throughput=statistics.median(r.throughput for r in runs)))
        return rows

    return compare


SUMMARIES = {"bsp": "bulk synchronous: a push is answered once every worker's update of the "
                    "iteration is applied",
             "ssp": f"bounded delay (SSP, tau={TAU}): iteration t waits for every worker's "
                    f"t - tau",
             "async": "asynchronous: pushes applied on arrival, no worker ever waits"}

TWINS = {consistency: register(StrategyTwin(
    name=f"ps.{consistency}", chapter="3",
    summary=f"parameter server (S servers, world = W workers), {text}",
    parameter="servers", points=(1, 2), quick_points=(1,), compare=_comparison(consistency),
    worlds=(2, 3), quick_worlds=(2,), min_world=1, max_world=4,
    world_unit="workers", ranks=lambda workers, servers: 1 + servers + workers))
    for consistency, text in SUMMARIES.items()}
