"""What a simulated run returns (:class:`PSTimeline`), and how both twins measure it.

The real twin (:mod:`backends.parameter_server.train`) reports its time per iteration,
throughput and idle time with these same functions, from the same per-iteration timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PSTimeline:
    """What a simulated run returns: each worker's iteration start and end times (s), the
    staleness of each of its pulls, and the time it idled in its consistency model's wait
    (``wait_s``, s, ``[iterations, workers]``). ``events`` lists, in simulated time order,
    what the servers did to the weights — ``(time_s, kind, server, [(worker, t), …])`` with
    kind ``pull`` (a worker's iteration ``t`` read the server's range) or ``apply`` (pushes
    applied) — from which :func:`simulator.ps_convergence.replay_sparse_lr` replays training.
    ``server_busy_s``: per server, the time per iteration its one receiving thread was held
    (receiving, handling, answering), s."""

    start_s: np.ndarray
    end_s: np.ndarray
    staleness: np.ndarray
    server_bytes: list[int]
    wait_s: np.ndarray | None = None
    events: tuple[tuple[float, str, int, tuple[tuple[int, int], ...]], ...] = ()
    server_busy_s: list[float] | None = None

    def idle_time_s(self, warmup: int = 2) -> float:
        """Mean time per iteration a worker idles in its consistency model's wait, s
        (:func:`idle_time_s`)."""
        return idle_time_s(self.wait_s if self.wait_s is not None
                           else np.zeros_like(self.start_s), warmup)

    def time_per_iteration_s(self, warmup: int = 2) -> float:
        """Median over workers and iterations (after ``warmup``) of one iteration's time, s:
        from one iteration's start to the next one's (the last: to its end)."""
        return iteration_time_s(self.start_s, self.end_s, warmup)

    def throughput(self, batch_size: int, warmup: int = 2) -> float:
        """Examples per second, all workers together (each at its median iteration time)."""
        return throughput(self.start_s, self.end_s, batch_size, warmup)


def iteration_times(start_s: np.ndarray, end_s: np.ndarray, warmup: int = 2) -> np.ndarray:
    """Each iteration's time per worker, ``[iterations − warmup, workers]``, s.

    Both twins report time per iteration this way, from the same per-iteration timestamps.
    The median is robust to the odd iteration a shared machine's scheduler stretches.
    """
    nxt = np.concatenate([start_s[1:], end_s[-1:]], axis=0)
    k = min(warmup, start_s.shape[0] - 1)
    times: np.ndarray = (nxt - start_s)[k:]
    return times


def idle_time_s(wait_s: np.ndarray, warmup: int = 2) -> float:
    """Mean over workers and iterations (after ``warmup``) of the time a worker spent blocked
    in its consistency model's wait, s: BSP — for the answer to its push, which a server sends
    only once every worker's push of the iteration is applied; SSP — for the clock ``t − τ``;
    async — never (0). Both twins measure it the same way, per iteration."""
    k = min(warmup, wait_s.shape[0] - 1)
    return float(np.mean(wait_s[k:]))


def iteration_time_s(start_s: np.ndarray, end_s: np.ndarray, warmup: int = 2) -> float:
    """Median of :func:`iteration_times` over workers and iterations, s."""
    return float(np.median(iteration_times(start_s, end_s, warmup)))


def throughput(start_s: np.ndarray, end_s: np.ndarray, batch_size: int,
               warmup: int = 2) -> float:
    """Examples per second: each worker's share of the batch over its median iteration."""
    per_worker = np.median(iteration_times(start_s, end_s, warmup), axis=0)
    return float(np.sum(batch_size / start_s.shape[1] / per_worker))
