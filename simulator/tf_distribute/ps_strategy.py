"""ParameterServerStrategy's ClusterCoordinator, simulated: K closures on W workers (ch. 19).

Twin of :mod:`backends.tf_distribute.coordinator` and :mod:`~backends.tf_distribute.
ps_strategy` (TF: ``tf.distribute.coordinator.ClusterCoordinator`` scheduling closures for
``tf.distribute.experimental.ParameterServerStrategy``). The coordinator holds a queue of
closures; each worker, as soon as it is free, takes the next one and runs it::

    dispatch   coordinator → worker        α + d/B          the closure and its arguments
    pull       worker ↔ ps p, per request  α + s/B, ps p serves, α + a/B   (rows, weights)
    compute    worker w                    c · slowdown[w]  (a straggler has slowdown > 1)
    push       worker ↔ ps p, per request  as a pull        (−lr·g into the shards)
    result     worker → coordinator        α + r/B

A ps task serves one request at a time (``ps_busy_s`` each, 0 in the textbook model), so
workers that pull from the same ps queue there. A worker lost at time ``t`` (``failures``,
TF's ``WorkerPreemptionError``) drops the closure it was running; the closure goes back to the
*front* of the queue and the next free worker runs it from the start — nothing is lost, the
time it had run is.

With no latency, no ps service and nothing shared, the makespan is the greedy schedule's
closed form :func:`greedy_makespan`; with one worker and one closure, :func:`closure_time_s`.
Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy

from simulator.ddp.cores import CoreShare


@dataclass(frozen=True)
class Request:
    """One request of a closure to ps task ``ps``: ``sent_bytes`` there, ``answered_bytes``
    back."""

    ps: int
    sent_bytes: int
    answered_bytes: int


@dataclass(frozen=True)
class ClosureCost:
    """What one closure does: its dispatch (bytes), its pulls, its compute (s, on one core
    alone), its pushes, its result (bytes)."""

    dispatch_bytes: int
    pulls: tuple[Request, ...]
    compute_s: float
    pushes: tuple[Request, ...]
    result_bytes: int = 64


@dataclass(frozen=True)
class Channel:
    """A point-to-point channel between two tasks: α (s) and B (bytes/s)."""

    latency_s: float
    bandwidth_Bps: float

    def message_s(self, nbytes: float) -> float:
        """α + n/B."""
        return self.latency_s + nbytes / self.bandwidth_Bps


def closure_time_s(cost: ClosureCost, channel: Channel, slowdown: float = 1.0) -> float:
    """One closure alone on an idle cluster, s: dispatch, round trips, compute, result."""
    trips = sum(channel.message_s(r.sent_bytes) + channel.message_s(r.answered_bytes)
                for r in cost.pulls + cost.pushes)
    return (channel.message_s(cost.dispatch_bytes) + trips + cost.compute_s * slowdown
            + channel.message_s(cost.result_bytes))


def greedy_makespan(closures: int, per_closure_s: Sequence[float]) -> float:
    """Time for ``closures`` equal closures pulled greedily from one queue by workers that
    take ``per_closure_s[w]`` each, nothing shared: whichever worker is free first takes the
    next closure (ties: the lower index), and the run ends with the last to finish — not
    the ``K``-th finish time: a slow worker that took a closure holds it to the end."""
    heap = [(0.0, w, t) for w, t in enumerate(per_closure_s)]
    heapq.heapify(heap)
    end = 0.0
    for _ in range(closures):
        free, w, t = heapq.heappop(heap)
        end = max(end, free + t)
        heapq.heappush(heap, (free + t, w, t))
    return end


@dataclass
class ScheduleResult:
    """A simulated run: ``makespan_s``; ``runs`` as ``(closure, worker, start s, end s)`` of
    every completed closure; ``lost`` as ``(worker, closure or None, time s)``."""

    makespan_s: float
    runs: list[tuple[int, int, float, float]] = field(default_factory=list)
    lost: list[tuple[int, int | None, float]] = field(default_factory=list)

    def closures_per_worker(self, workers: int) -> list[int]:
        """How many closures each worker completed."""
        counts = [0] * workers
        for _, w, _, _ in self.runs:
            counts[w] += 1
        return counts


class _Run:
    """One simulation's shared state: the queue, the ps tasks, the host's cores."""

    def __init__(self, env: simpy.Environment, closures: int, num_ps: int, cores: float,
                 ranks: int) -> None:
        self.env = env
        self.queue = simpy.PriorityStore(env)
        for c in range(closures):
            self.queue.put(simpy.PriorityItem((1, c), c))
        self.ps = [simpy.Resource(env, capacity=1) for _ in range(num_ps)]
        self.cores = CoreShare(env, cores, ranks)
        self.remaining = closures
        self.all_done = env.event()
        self.result = ScheduleResult(0.0)

    def retry(self, closure: int) -> None:
        """Put ``closure`` back at the front of the queue (before every first attempt)."""
        self.queue.put(simpy.PriorityItem((0, closure), closure))


def _request(run: _Run, r: Request, channel: Channel, ps_busy_s: float
             ) -> Generator[simpy.Event, Any, None]:
    """A round trip to ps ``r.ps``: the request travels, waits for the ps, is served, the
    answer travels back."""
    yield run.env.timeout(channel.message_s(r.sent_bytes))
    with run.ps[r.ps].request() as turn:
        yield turn
        yield run.env.timeout(ps_busy_s)
    yield run.env.timeout(channel.message_s(r.answered_bytes))


def _worker(run: _Run, w: int, cost: ClosureCost, channel: Channel, slowdown: float,
            ps_busy_s: float) -> Generator[simpy.Event, Any, None]:
    """Worker ``w``'s thread in the coordinator and the worker itself: take, run, repeat."""
    env, closure = run.env, None
    get = None
    try:
        while True:
            get = run.queue.get()
            item = yield get
            closure, start = item.item, env.now
            yield env.timeout(channel.message_s(cost.dispatch_bytes))
            for r in cost.pulls:
                yield from _request(run, r, channel, ps_busy_s)
            yield from run.cores.run(cost.compute_s * slowdown)
            for r in cost.pushes:
                yield from _request(run, r, channel, ps_busy_s)
            yield env.timeout(channel.message_s(cost.result_bytes))
            run.result.runs.append((closure, w, start, env.now))
            closure = None
            run.remaining -= 1
            if run.remaining == 0:
                run.all_done.succeed()
    except simpy.Interrupt:
        if closure is None and get is not None and get.triggered:
            taken: Any = get.value  # taken at the very moment of the loss
            closure = taken.item
        elif get is not None and not get.triggered:
            get.cancel()
        run.result.lost.append((w, closure, env.now))
        if closure is not None:
            run.retry(closure)


def _preempt(env: simpy.Environment, process: simpy.Process, at_s: float
             ) -> Generator[simpy.Event, Any, None]:
    yield env.timeout(at_s)
    if process.is_alive:
        process.interrupt("preempted")


def simulate_closures(closures: int, workers: int, cost: ClosureCost, channel: Channel,
                      num_ps: int = 1, slowdown: Sequence[float] | None = None,
                      failures: Mapping[int, float] | None = None, ps_busy_s: float = 0.0,
                      cores: float = math.inf) -> ScheduleResult:
    """Run ``closures`` closures of ``cost`` on ``workers`` workers and ``num_ps`` ps tasks.

    Args:
        slowdown: each worker's compute factor (1: nominal; a straggler's is larger).
        failures: worker → the time it is lost, s.
        ps_busy_s: how long a ps task is busy serving one request, s.
        cores: CPU cores the workers' computes share (processor sharing; ``inf``: none).

    Raises:
        RuntimeError: every worker was lost with closures left.
        ValueError: a slowdown per worker is missing or not positive, or a request goes to
            a ps task that does not exist.
    """
    slow = list(slowdown) if slowdown is not None else [1.0] * workers
    if len(slow) != workers or min(slow, default=1.0) <= 0:
        raise ValueError(f"need {workers} positive slowdowns, got {slow}")
    if any(not 0 <= r.ps < num_ps for r in cost.pulls + cost.pushes):
        raise ValueError(f"a request goes to a ps task beyond the {num_ps} there are")
    env = simpy.Environment()
    run = _Run(env, closures, num_ps, cores, workers)
    procs = [env.process(_worker(run, w, cost, channel, slow[w], ps_busy_s))
             for w in range(workers)]
    for w, at_s in (failures or {}).items():
        env.process(_preempt(env, procs[w], at_s))
    if closures == 0:
        return run.result
    _run_until_done(env, run)
    return run.result


def _run_until_done(env: simpy.Environment, run: _Run) -> None:
    """Advance until every closure completed; fail when events run out first."""
    while not run.all_done.triggered:
        if env.peek() == math.inf:
            lost = ", ".join(f"worker {w} at {t:.3g} s" for w, _, t in run.result.lost)
            raise RuntimeError(f"{run.remaining} closures left and no worker: lost {lost}")
        env.step()
    run.result.makespan_s = env.now
