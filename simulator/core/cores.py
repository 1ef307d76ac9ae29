"""A pool of CPU cores shared by the ranks' computations (processor sharing).

On one host, ranks are processes, and when more of them compute at once than there are cores,
the operating system time-slices them: with ``n`` computations running on ``c`` cores each
advances at ``min(1, c/n)`` of its one-core speed (processor sharing, Kleinrock 1967 — the
same max-min rule the network's ``fair`` links use for bytes). A per-layer profile measured on
one process gives one-core times; this pool turns them into times under oversubscription, e.g.
four pipeline stages on a two-core laptop.

``cores = math.inf`` (the default of :func:`~simulator.pipeline.simulate.simulate_pipeline`)
means every rank has its own core: a computation takes exactly its time.

Cores are not all a computation shares: the last-level cache and the memory bandwidth are one
for the whole host. A computation may therefore carry a second time, ``together_s`` — what it
takes on its own core while other ranks compute at the same moment, a primitive measured with
copies running at once (as calibration times an optimizer step with every rank stepping). While
it is the only computation running it advances at ``1/seconds`` of its work per second; while
others run too, at ``min(1, c/n)/together_s``.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import simpy

from simulator.core.comm import SimComm, SimGen


class CorePool:
    """``cores`` cores shared fairly by whatever computations run at the moment."""

    def __init__(self, env: simpy.Environment, cores: float) -> None:
        if not cores > 0:
            raise ValueError(f"cores must be > 0, got {cores}")
        self.env, self.cores = env, cores
        # id -> [remaining share of the work, done event, alone s, together s]
        self._jobs: dict[int, list[Any]] = {}
        self._ids = 0
        self._last = 0.0
        self._version = 0

    def _share(self) -> float:
        return min(1.0, self.cores / len(self._jobs)) if self._jobs else 1.0

    def _rate(self, job: list[Any]) -> float:
        """Share of ``job``'s work done per second now."""
        seconds: float = job[2] if len(self._jobs) == 1 else job[3]
        return self._share() / seconds

    def _advance(self) -> None:
        now = float(self.env.now)
        for job in self._jobs.values():
            job[0] -= (now - self._last) * self._rate(job)
        self._last = now

    def _reschedule(self) -> None:
        self._version += 1
        if self._jobs:
            soonest = min(max(job[0], 0.0) / self._rate(job) for job in self._jobs.values())
            self.env.process(self._wake(soonest, self._version))

    def _wake(self, dt: float, version: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(dt)
        if version != self._version:
            return  # a start or finish since then rescheduled
        self._advance()
        # finish every job within rounding of zero — or whose time left is below what the
        # clock can still add to ``now`` (many sub-µs pieces at a late instant would otherwise
        # wake the pool at the same instant forever) — then share the cores anew
        now = self._last
        done = [key for key, job in self._jobs.items()
                if job[0] <= 1e-12 * max(1.0, now) or now + job[0] / self._rate(job) <= now]
        for key in done:
            self._jobs.pop(key)[1].succeed()
        self._reschedule()

    def run(self, seconds: float, together_s: float | None = None
            ) -> Generator[simpy.Event, Any, None]:
        """Compute for ``seconds`` of one-core time (``together_s`` while others compute too;
        default ``seconds``), slowed while the cores are oversubscribed."""
        if seconds <= 0:
            yield self.env.timeout(0.0)
            return
        if math.isinf(self.cores) and together_s is None:
            yield self.env.timeout(seconds)
            return
        self._advance()
        done = self.env.event()
        self._jobs[self._ids] = [1.0, done, seconds, seconds if together_s is None
                                 else max(together_s, 1e-12)]
        self._ids += 1
        self._reschedule()
        yield done


def spend(comm: SimComm, seconds: float, name: str, cores: CorePool | None,
          together_s: float | None = None) -> SimGen:
    """Rank ``comm`` computes for ``seconds`` of one-core time — on ``cores`` if given, else on
    a core of its own — recorded as a ``compute`` span; returns the wall time it took, s.
    ``together_s``: its time while other ranks compute too (see :class:`CorePool`)."""
    start = comm.now
    if cores is None:
        yield comm.env.timeout(seconds)
    else:
        yield from cores.run(seconds, together_s)
    comm.span("compute", name, start)
    return comm.now - start
