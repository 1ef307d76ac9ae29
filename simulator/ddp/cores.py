"""Cores shared by compute and communication threads.

On a host whose ranks are processes sharing ``cores`` CPU cores, the backward threads and the
communication threads compete for them. :class:`CoreShare` is processor sharing by default
(every busy thread gets ``min(1, cores / demand)`` of what it asks for); given a measured
:class:`Interference` (compute and communication speeds while both run, from a primitive in
:mod:`lab.ddp`), those speeds instead. A GPU cluster has ``cores = inf`` and no such
contention. Communication times come from the network model with all ``p`` ranks
communicating, as calibrated.

Units: seconds.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy


class _Job:
    __slots__ = ("done", "kind", "rate", "remaining")

    def __init__(self, kind: str, seconds: float, done: simpy.Event) -> None:
        self.kind, self.remaining, self.done, self.rate = kind, seconds, done, 0.0


@dataclass(frozen=True)
class Interference:
    """Measured speeds of compute and communication while both run, on every rank at once.

    Each is relative to the same work running without the other (every rank still doing it):
    ``compute = 0.5`` means a backward thread goes half as fast while its rank communicates.
    :mod:`lab.ddp` measures both on a primitive — matmuls on the main thread while a second
    thread exchanges messages with a partner rank — because on a shared host they are more
    than processor sharing predicts (caches, memory bandwidth, the scheduler).
    """

    compute: float = 1.0
    comm: float = 1.0

    def __post_init__(self) -> None:
        if not (0 < self.compute <= 1.5 and 0 < self.comm <= 1.5):
            raise ValueError(f"interference speeds must be in (0, 1.5], got {self}")


class CoreShare:
    """Processor sharing of one host's ``cores`` among busy threads (Kleinrock 1967).

    :meth:`run` spends ``seconds`` of work that takes that long when its thread gets all the
    CPU it asks for. A compute thread asks for a whole core; a communication thread asks for
    ``comm_demand`` cores — a rank waiting for bytes on a socket sleeps, so while it
    communicates its process keeps only part of a core busy (:mod:`lab.ddp` measures the share
    during point-to-point exchanges). When the busy threads ask for ``D`` cores in all, each
    progresses at ``min(1, cores / D)`` of its own speed.

    Communication times calibrated with all ``ranks`` communicating at once already had their
    share of the cores in them: :attr:`comm_share` turns them back into one unimpeded
    thread's.

    Given a measured :class:`Interference`, it replaces processor sharing between the two
    kinds: compute threads share the cores among themselves and, while any communication runs,
    go at ``interference.compute`` of that; communication goes at ``interference.comm`` of its
    calibrated speed while any compute runs.
    """

    def __init__(self, env: simpy.Environment, cores: float = math.inf, ranks: int = 1,
                 comm_demand: float = 1.0, interference: Interference | None = None) -> None:
        if not cores > 0:
            raise ValueError(f"a host needs cores > 0, got {cores}")
        if not comm_demand > 0:
            raise ValueError(f"a communication thread asks for > 0 cores, got {comm_demand}")
        self.env, self.cores, self.comm_demand = env, cores, comm_demand
        self.interference = interference
        self.comm_share = min(1.0, cores / (max(ranks, 1) * comm_demand))
        self._jobs: list[_Job] = []
        self._last = 0.0
        self._version = 0

    def run(self, seconds: float, kind: str = "compute") -> Generator[simpy.Event, Any, None]:
        """Do ``seconds`` of ``kind`` (``compute`` or ``comm``) work (a process body)."""
        if seconds <= 0:
            return
        if math.isinf(self.cores) and self.interference is None:  # nothing shared: a delay
            yield self.env.timeout(seconds)
            return
        job = _Job(kind, seconds, self.env.event())
        self._advance()
        self._jobs.append(job)
        self._reschedule()
        yield job.done

    def _advance(self) -> None:
        elapsed = self.env.now - self._last
        for job in self._jobs:
            job.remaining -= job.rate * elapsed
        self._last = self.env.now

    def _reschedule(self) -> None:
        if self.interference is not None:
            computing = sum(j.kind == "compute" for j in self._jobs)
            both = 0 < computing < len(self._jobs)
            compute = min(1.0, self.cores / max(computing, 1))
            compute *= self.interference.compute if both else 1.0
            comm = self.interference.comm if both else 1.0
            for job in self._jobs:
                job.rate = compute if job.kind == "compute" else comm
        else:
            demand = sum(1.0 if j.kind == "compute" else self.comm_demand for j in self._jobs)
            share = min(1.0, self.cores / max(demand, 1e-300))
            for job in self._jobs:
                job.rate = share if job.kind == "compute" else min(1.0, share / self.comm_share)
        self._version += 1
        if self._jobs:
            dt = min(max(j.remaining, 0.0) / j.rate for j in self._jobs)
            self.env.process(self._wake(dt, self._version))

    def _wake(self, dt: float, version: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(dt)
        if version != self._version:
            return
        self._advance()
        done = [j for j in self._jobs if j.remaining <= 1e-12 * max(1.0, j.rate)]
        self._jobs = [j for j in self._jobs if j not in done]
        for job in done:
            job.done.succeed()
        self._reschedule()
