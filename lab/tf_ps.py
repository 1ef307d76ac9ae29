"""ParameterServerStrategy, predicted and measured: K closures on W workers (book ch. 19).

Glue between the real twin (:mod:`backends.tf_distribute.ps_measure`: TF's
``ParameterServerStrategy`` + ``ClusterCoordinator`` on PyTorch processes) and the simulated
one (:func:`simulator.tf_distribute.ps_strategy.simulate_closures`). The prediction reads
primitives only, each measured apart from the strategy:

* ``compute_s`` — one closure's math, CPU time on a worker task (:func:`~backends.
  tf_distribute.ps_measure.profile_compute`);
* α and B — a round trip to a ps task, fitted on echoes of two sizes (:func:`~backends.
  tf_distribute.ps_measure.profile_channel`);
* α_busy — the same round trip while every worker echoes at once (:func:`~backends.
  tf_distribute.ps_measure.profile_busy_latency`);
* ``ps_busy_s`` — a ps task's own work per request, CPU time on a worker task
  (:func:`~backends.tf_distribute.ps_measure.profile_service`);
* the closure's messages from the model's shapes and the shards' placement
  (:func:`~backends.tf_distribute.ps_measure.closure_messages`).

Two tiers: **textbook** — every message α + n/B, the compute alone on its core, the ps tasks
never busy; **host** — what a shared host adds: every message pays α_busy instead of α (with
more processes than cores a message waits for its receiver to be scheduled), a ps task serves
one request at a time (``ps_busy_s`` each, so workers queue at it) and the workers' computes
share the host's cores. Times are seconds.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.tf_distribute.ps_strategy import (
    Channel,
    ClosureCost,
    Request,
    ScheduleResult,
    simulate_closures,
)

NUM_PS = 2
"""ps tasks of every run: the embedding table's two shards land on different tasks."""

PROFILE_REPEATS = 20
"""Repeats of each primitive."""


@dataclass(frozen=True)
class Primitives:
    """The measured primitives of a prediction (s, bytes/s) and the closure's messages."""

    compute_s: float
    latency_s: float
    busy_latency_s: float
    bandwidth_Bps: float
    ps_busy_s: float
    messages: dict[str, Any]

    def cost(self) -> ClosureCost:
        """One closure's :class:`ClosureCost`."""
        m = self.messages
        return ClosureCost(m["dispatch"], tuple(Request(*r) for r in m["pulls"]),
                           self.compute_s, tuple(Request(*r) for r in m["pushes"]))

    def channel(self, model: str = "textbook") -> Channel:
        """The channel of tier ``model``: α alone (textbook) or α_busy (host)."""
        latency_s = self.busy_latency_s if model == "host" else self.latency_s
        return Channel(latency_s, self.bandwidth_Bps)


def primitives(workers: int, repeats: int = PROFILE_REPEATS) -> Primitives:
    """Measure the primitives on this host for ``workers`` workers (starts a worker and a ps
    task for the lone echo and the one-worker profiles, then ``workers`` and :data:`NUM_PS`
    for the busy echo)."""
    from backends.tf_distribute.ps_measure import (
        closure_messages,
        profile_busy_latency,
        profile_channel,
    )

    alone = profile_channel(repeats=repeats)
    return Primitives(alone["compute_s"], alone["latency_s"],
                      profile_busy_latency(workers, NUM_PS), alone["bandwidth_Bps"],
                      alone["service_s"], closure_messages(NUM_PS))


def closure_bytes(closures: int) -> int:
    """Bytes ``closures`` closures move: dispatch, requests and answers, result (64 B)."""
    from backends.tf_distribute.ps_measure import closure_messages

    m = closure_messages(NUM_PS)
    per = m["dispatch"] + 64 + sum(sent + answered for _, sent, answered
                                  in m["pulls"] + m["pushes"])
    return closures * int(per)


def schedule(prims: Primitives, workers: int, closures: int, model: str = "host",
             slowdown: Sequence[float] | None = None) -> ScheduleResult:
    """The simulated run of ``closures`` closures on ``workers`` workers in tier ``model``
    (``textbook`` or ``host``); ``slowdown`` makes stragglers."""
    host = model == "host"
    return simulate_closures(closures, workers, prims.cost(), prims.channel(model), NUM_PS,
                             slowdown=slowdown, ps_busy_s=prims.ps_busy_s if host else 0.0,
                             cores=float(os.cpu_count() or 1) if host else float("inf"))


def predict(prims: Primitives, workers: int, closures: int, model: str = "host",
            slowdown: Sequence[float] | None = None) -> float:
    """Predicted time to run ``closures`` closures on ``workers`` workers, s."""
    return schedule(prims, workers, closures, model, slowdown).makespan_s


def measure(workers: int, closures: int, repeats: int) -> dict[str, Any]:
    """The real twin: median, p10, p90 (s) of ``repeats`` runs of ``closures`` closures on
    ``workers`` workers, and how many closures each worker ran (summed over the runs); on
    torchrun's ranks also where each task ran (``tasks``: task, rank, node, host)."""
    from backends.tf_distribute.ps_measure import measure_closures

    out = measure_closures(workers, closures, repeats, NUM_PS)
    times = out["times_s"]
    q = (statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1
         else list(times) * 9)
    return {"median_s": statistics.median(times), "p10_s": q[0], "p90_s": q[-1],
            "closures_per_worker": out["closures_per_worker"],
            **({"tasks": out["tasks"]} if "tasks" in out else {})}
