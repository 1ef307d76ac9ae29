"""``horovodrun``'s start-up, simulated: task processes started, registered, released.

Book chapter 7, "horovodrun" and "Network basics and the Driver/Task services"; Horovod
``horovod/runner/launch.py``, ``gloo_run.py``, ``driver/driver_service.py``. On one host::

    driver    spawn 0 · spawn 1 · … ─────────────── all registered ─ notify ─► every task
    task r         start (interpreter + imports) ─ register ─►│        ◄─ go ─ init ─ ready

* the driver starts ``p`` task processes, one after another (``spawn_s`` each);
* each task starts its interpreter and imports its framework: ``process_start_s`` of CPU
  time on one free core — all tasks start at once and share the host's ``cores``
  (:class:`simulator.core.cores.CorePool`: four ranks on two cores take twice as long);
* each registers with the driver (one small message, ``message_s``);
* once all have registered the driver tells every task to go (one message each), and each
  task joins the process group (a round trip to the rendezvous store, ``2·message_s``).

``process_start_s`` is a primitive measured on one process (:func:`lab.horovod_predict.
process_start_s`); ``message_s`` is the calibrated one-way latency α. Units: seconds.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.core.cores import CorePool
from simulator.core.engine import Trace


@dataclass(frozen=True)
class StartupPrediction:
    """When the job is ready (s from the launcher's first spawn).

    Attributes:
        ready_s: when the last task has joined the process group.
        registered_s: when the driver has heard from every task.
        task_ready_s: when each task was ready, by rank.
        trace: spans: rank ``r`` for task ``r``, rank ``-1`` for the driver.
    """

    ready_s: float
    registered_s: float
    task_ready_s: list[float]
    trace: Trace


def predict_startup(world_size: int, process_start_s: float, message_s: float,
                    cores: float = math.inf, spawn_s: float = 0.0) -> StartupPrediction:
    """Simulate the launcher bringing up ``world_size`` tasks on one host."""
    if world_size < 1:
        raise ValueError(f"the launcher needs at least 1 task, got {world_size}")
    if min(process_start_s, message_s, spawn_s) < 0:
        raise ValueError("start-up costs must be ≥ 0 s")
    env = simpy.Environment()
    pool = CorePool(env, cores)
    trace = Trace()
    registered = [env.event() for _ in range(world_size)]
    go = env.event()
    ready = [0.0] * world_size

    def task(rank: int) -> Generator[simpy.Event, Any, None]:
        start = float(env.now)
        yield from pool.run(process_start_s)
        trace.record(rank, "compute", "start interpreter + imports", start, float(env.now))
        start = float(env.now)
        yield env.timeout(message_s)
        trace.record(rank, "send", "register with driver", start, float(env.now))
        registered[rank].succeed()
        start = float(env.now)
        yield go
        yield env.timeout(message_s)
        trace.record(rank, "wait", "wait for all tasks", start, float(env.now))
        start = float(env.now)
        yield env.timeout(2 * message_s)
        trace.record(rank, "send", "join process group", start, float(env.now))
        ready[rank] = float(env.now)

    registered_at = [0.0]

    def driver() -> Generator[simpy.Event, Any, None]:
        for rank in range(world_size):
            start = float(env.now)
            yield env.timeout(spawn_s)
            trace.record(-1, "compute", f"spawn task {rank}", start, float(env.now))
            env.process(task(rank))
        start = float(env.now)
        yield env.all_of(registered)
        trace.record(-1, "wait", "all tasks registered", start, float(env.now))
        registered_at[0] = float(env.now)
        go.succeed()

    env.process(driver())
    env.run()
    return StartupPrediction(max(ready), registered_at[0], ready, trace)
