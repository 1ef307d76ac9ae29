"""The cost of work on shared cores: every process of one host shares its CPU cores.

A small machine running ``1 + S + W`` ranks is oversubscribed: the ranks' work, and on loopback
the van's messages too, queue for the same cores (:class:`CpuPool`, processor sharing).
"""

from __future__ import annotations

import math
from typing import Any

import simpy

from simulator.core.comm import SimGen


class CpuPool:
    """``cores`` CPU cores shared by every process of one host (processor sharing).

    ``yield from cpu.run(seconds)`` does ``seconds`` of single-core work; while ``k`` pieces of
    work are in progress each runs at ``min(1, cores/k)`` of a core, so five processes on two
    cores take 2.5 times as long as one alone — the oversubscription a small machine has when
    it runs ``1 + S + W`` ranks. ``cores = inf`` gives every process its own core.
    """

    def __init__(self, env: simpy.Environment, cores: float) -> None:
        self.env, self.cores = env, cores
        self._jobs: list[list[Any]] = []  # [remaining s, done event]
        self._last = 0.0
        self._version = 0

    def _rate(self) -> float:
        return min(1.0, self.cores / len(self._jobs)) if self._jobs else 1.0

    def _advance(self) -> None:
        rate, dt = self._rate(), self.env.now - self._last
        for job in self._jobs:
            job[0] -= rate * dt
        self._last = self.env.now

    def _arm(self) -> None:
        self._version += 1
        if self._jobs:
            dt = max(0.0, min(j[0] for j in self._jobs)) / self._rate()
            self.env.process(self._wake(dt, self._version))

    def _wake(self, dt: float, version: int) -> SimGen:
        yield self.env.timeout(dt)
        if version != self._version:
            return
        self._advance()
        done = [j for j in self._jobs if j[0] <= 1e-12]
        self._jobs = [j for j in self._jobs if j[0] > 1e-12]
        for job in done:
            job[1].succeed()
        self._arm()

    def run(self, seconds: float) -> SimGen:
        """Do ``seconds`` of one core's work."""
        if seconds <= 0:
            return
        if math.isinf(self.cores):
            yield self.env.timeout(seconds)
            return
        self._advance()
        job: list[Any] = [seconds, self.env.event()]
        self._jobs.append(job)
        self._arm()
        yield job[1]
