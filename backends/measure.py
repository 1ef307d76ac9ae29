"""The timing harness: warm-up, barrier-aligned repeats, median / p10 / p90.

Real timings on a shared machine are noisy, so every measurement is a distribution: each
repeat starts with all ranks leaving a barrier together, every rank times the operation, and
the repeat's time is the slowest rank's (an operation is done when the last rank is done).
We report the median and the 10th/90th percentiles — never the mean, which one preempted
repeat can drag anywhere. On a GPU (:func:`backends.device.device`) the device is synchronized
before each clock read, since CUDA kernels return to the host before they have run.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from backends.device import device, synchronizer


@dataclass(frozen=True)
class Timing:
    """A measured time distribution, s; ``calls``: the calls each sample ran back to back (its
    time is per call)."""

    median_s: float
    p10_s: float
    p90_s: float
    samples_s: tuple[float, ...]
    calls: int = 1

    @classmethod
    def from_samples(cls, samples: list[float], calls: int = 1) -> Timing:
        """Summarise samples (s) by median and 10th/90th percentiles."""
        if not samples:
            raise ValueError("no samples to summarise")
        ordered = sorted(samples)
        return cls(statistics.median(ordered), _percentile(ordered, 10),
                   _percentile(ordered, 90), tuple(samples), calls)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for JSON)."""
        return asdict(self)

    def columns(self, prefix: str) -> dict[str, float]:
        """``{prefix_median_s, prefix_p10_s, prefix_p90_s}``: a CSV record's columns, s."""
        return {f"{prefix}_median_s": self.median_s, f"{prefix}_p10_s": self.p10_s,
                f"{prefix}_p90_s": self.p90_s}


def _percentile(ordered: list[float], q: float) -> float:
    """Linear-interpolated percentile of sorted data."""
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


MIN_REPEAT_S = 5e-4
"""A repeat runs the operation back to back until it lasts about this long, s, so that the
barrier's exit skew (tens of µs) does not swamp a short operation — as nccl-tests does."""


def measure(fn: Callable[[], Any], repeats: int = 10, warmup: int = 2,
            group: dist.ProcessGroup | None = None, inner: int | None = None,
            repeat_s: float = MIN_REPEAT_S) -> Timing:
    """Time ``fn()`` on every rank of ``group``; call it from every rank.

    Each repeat: barrier, run ``fn()`` ``inner`` times back to back, then take the slowest
    rank's elapsed time divided by ``inner`` (an all-reduce outside the timed region).
    ``inner=None`` picks it from the warm-up so that a repeat lasts about ``repeat_s``
    (:data:`MIN_REPEAT_S` unless asked; at most 1000 calls); all ranks agree on it. Returns
    the same :class:`Timing` on every rank, in seconds per call.
    """
    return measure_many([fn], repeats, warmup, group, inner, repeat_s)[0]


def measure_many(fns: Sequence[Callable[[], Any]], repeats: int = 10, warmup: int = 2,
                 group: dist.ProcessGroup | None = None,
                 inner: int | None = None, repeat_s: float = MIN_REPEAT_S) -> list[Timing]:
    """:func:`measure` for several operations, their repeats *interleaved*.

    Round ``k`` takes the ``k``-th sample of every operation in turn, so a slow spell of the
    machine (another process, a descheduled vCPU) spreads over all operations instead of
    spoiling every sample of one of them.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    elapsed = torch.zeros(1, dtype=torch.float64, device=device())
    synchronize = synchronizer()

    def timed(fn: Callable[[], Any], calls: int) -> float:
        dist.barrier(group=group)
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize()
        elapsed[0] = time.perf_counter() - start
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
        return float(elapsed[0])

    inners = []
    for fn in fns:
        warm = [timed(fn, 1) for _ in range(max(warmup, 1))]
        inners.append(inner or max(1, min(1000, math.ceil(repeat_s / max(min(warm), 1e-7)))))
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, calls, out in zip(fns, inners, samples, strict=True):
            out.append(timed(fn, calls) / calls)
    return [Timing.from_samples(s, k) for s, k in zip(samples, inners, strict=True)]


def median_time(fn: Callable[[], Any], repeats: int = 10, warmup: int = 2) -> float:
    """Median seconds of ``fn()`` in *this* process alone (no group, no barrier): for the
    one-process primitives a prediction is built from (a layer's forward, an optimizer step)."""
    samples = []
    synchronize = synchronizer()
    for k in range(warmup + repeats):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        if k >= warmup:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)
