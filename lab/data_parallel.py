"""DataParallel on this machine: the measured step beside its prediction (book ch. 4).

The real twin (:mod:`backends.data_parallel`) runs its replicas as threads of *this* process,
so its simulated twin (:mod:`simulator.data_parallel`) is given this process's primitives,
each measured on **one thread** with no DataParallel involved (:func:`measure_primitives`):

* the MLP's forward and backward time on a chunk of each size the replicas will get, the
  loss (forward and backward on the whole batch) and the SGD step — a compute profile
  (:class:`~simulator.data_parallel.TableProfile`);
* the copy rate (cloning every parameter) and two reduction rates: adding two copies of
  every parameter into a new tensor, as ``reduce_add``'s first sum does, and adding in place,
  as it adds the others. A copy and the first sum write newly allocated memory: on Linux its
  pages are mapped on first touch, which makes a 16 MB copy several times slower than a copy
  into memory already in use.

The machine is then modelled as it is: a "link" between replicas is a copy done by the host
thread (:func:`~simulator.data_parallel.threads_cluster`), copies one after another, the
backward of every replica on the one CPU autograd thread, and ``k`` forward threads sharing
the host's cores (``max(1, k/cores)`` slower each). Nothing is fitted to a DataParallel
measurement. :func:`compare` puts the prediction beside the measured step (median, p10, p90
over repeats; intra-op threads 1, so each replica is one thread).

What the model still misses (``benchmarks/data_parallel_accuracy.py``, median |error| about
6 %): whether a copy lands in fresh or recycled memory is the allocator's choice, so a
replicate sometimes runs at the warm copy rate (faster than predicted); and in DataParallel
every replica's weight gradients are alive at once until ``reduce_add``, so they land in fresh
pages, which the one-thread profile (where the allocator recycles the gradient buffers) does
not pay — about a tenth more backward at a batch of 1000 on 4 replicas.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from backends.data_parallel import DataParallel
from backends.measure import Timing
from lab import models
from simulator.core.comm import SimResult
from simulator.core.engine import Trace
from simulator.data_parallel import (
    TableProfile,
    Workload,
    chunk_sizes,
    simulate_data_parallel,
    threads_cluster,
)

DEFAULT_WIDTHS = (512, 2048, 2048, 10)
"""The MLP measured: 5.3 M parameters, 21 MB of float32."""
SMOKE_WIDTHS = (32, 64, 10)


def mlp(widths: Sequence[int], seed: int = 0) -> nn.Sequential:
    """``Linear`` layers of ``widths`` with ReLU between them (:func:`lab.models.mlp`)."""
    return models.mlp(widths, seed, nn.ReLU)


def cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _median_s(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing.from_samples(samples).median_s


@dataclass(frozen=True)
class Primitives:
    """What one thread measured: the compute profile and the copy and reduction rates."""

    profile: TableProfile
    memcpy_Bps: float
    reduce_Bps: float
    first_sum_Bps: float
    cores: int


def measure_primitives(widths: Sequence[int], batch: int, replicas: Sequence[int],
                       repeats: int = 5) -> Primitives:
    """Measure on one thread the primitives the prediction needs (see the module docstring)."""
    model = mlp(widths)
    params = [p.detach() for p in model.parameters()]
    nbytes = sum(p.numel() * p.element_size() for p in params)
    batches = sorted({c for k in replicas for c in chunk_sizes(batch, k)} | {batch})
    forward, backward = [], []
    with _one_intra_op_thread():
        for c in batches:
            x = torch.randn(c, widths[0])
            forward.append(_median_s(functools.partial(model, x), repeats))
            backward.append(Timing.from_samples(
                [_backward_s(model, x) for _ in range(repeats + 1)][1:]).median_s)
        loss = [_median_s(lambda: _loss(batch, widths[-1]), repeats)] * len(batches)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        step = _median_s(opt.step, repeats)
        # Results are kept until the end, so that no repeat reuses the memory of another.
        kept: list[torch.Tensor] = []
        memcpy = _median_s(lambda: kept.extend(p.clone() for p in params), repeats)
        others = [p.clone() for p in params]
        first = _median_s(
            lambda: kept.extend(a + b for a, b in zip(others, params, strict=True)), repeats)
        kept.clear()
        add = _median_s(lambda: [a.add_(b) for a, b in zip(others, params, strict=True)],
                        repeats)
    profile = TableProfile(tuple(batches), tuple(forward), tuple(backward), tuple(loss), step)
    return Primitives(profile, nbytes / memcpy, nbytes / add, nbytes / first, cores())


def _backward_s(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds of one backward through ``model`` on ``x`` (the forward is not timed)."""
    out = model(x)
    start = time.perf_counter()
    out.backward(torch.ones_like(out))
    return time.perf_counter() - start


def _loss(batch: int, classes: int) -> None:
    """The loss's forward and backward on a whole batch of logits."""
    logits = torch.randn(batch, classes, requires_grad=True)
    target = torch.randint(0, classes, (batch,))
    nn.functional.cross_entropy(logits, target).backward()  # type: ignore[no-untyped-call]


class _one_intra_op_thread:
    """``torch.set_num_threads(1)`` inside a ``with`` block: each replica is one thread."""

    def __enter__(self) -> None:
        self.saved = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.saved)


def workload(widths: Sequence[int], batch: int) -> Workload:
    """The sizes one iteration of :func:`mlp` moves (float32)."""
    return Workload.for_mlp(widths, batch)


def predict_step(primitives: Primitives, widths: Sequence[int], batch: int,
                 replicas: int) -> SimResult:
    """The simulated DataParallel iteration on this machine's threads."""
    cluster = threads_cluster(replicas, primitives.memcpy_Bps, primitives.reduce_Bps)
    return simulate_data_parallel(cluster, workload(widths, batch), primitives.profile,
                                  copies="serial", backward="serial", cores=primitives.cores,
                                  first_sum_Bps=primitives.first_sum_Bps)


def measure_step(widths: Sequence[int], batch: int, replicas: int, repeats: int = 5,
                 trace: bool = False) -> tuple[Timing, Trace | None]:
    """Time the real DataParallel iteration (zero_grad, forward, loss, backward, SGD step);
    with ``trace``, one more iteration is traced span by span."""
    model = mlp(widths)
    dp = DataParallel(model, ["cpu"] * replicas)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, widths[0])
    y = torch.randint(0, widths[-1], (batch,))

    def step() -> None:
        opt.zero_grad()
        out = dp(x)
        start = time.perf_counter()
        loss = nn.functional.cross_entropy(out, y)
        if dp.trace is not None:
            dp.trace.record(0, "compute", "loss", start, time.perf_counter())
            start = time.perf_counter()
        before = len(dp.trace) if dp.trace is not None else 0
        loss.backward()  # type: ignore[no-untyped-call]
        if dp.trace is not None:  # one span for all replicas' backward, under the copies and
            dp.trace.record(0, "step", "backward (all)", start, time.perf_counter())
            dp.trace.spans.insert(before, dp.trace.spans.pop())  # sums it contains
            start = time.perf_counter()
        opt.step()
        if dp.trace is not None:
            dp.trace.record(0, "compute", "optimizer step", start, time.perf_counter())

    with _one_intra_op_thread():
        step()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            samples.append(time.perf_counter() - start)
        recorded = None
        if trace:
            dp.trace = recorded = Trace()
            step()
    return Timing.from_samples(samples), recorded


def compare(widths: Sequence[int] = DEFAULT_WIDTHS, batch: int = 256,
            replicas: Sequence[int] = (1, 2, 3, 4), repeats: int = 5
            ) -> list[dict[str, Any]]:
    """Predicted and measured iteration per replica count: one row each, times in s.

    Rows carry ``predicted_s``, ``measured_median_s``/``p10``/``p90``, ``rel_error``, the
    predicted ``phases`` and the primitives used.
    """
    prims = measure_primitives(widths, batch, replicas, repeats)
    rows = []
    for k in replicas:
        predicted = predict_step(prims, widths, batch, k)
        measured, _ = measure_step(widths, batch, k, repeats)
        rows.append({
            "twin": "data_parallel", "replicas": k, "batch": batch, "widths": list(widths),
            "cores": prims.cores, "predicted_s": predicted.makespan_s,
            "measured_median_s": measured.median_s, "measured_p10_s": measured.p10_s,
            "measured_p90_s": measured.p90_s,
            "rel_error": (predicted.makespan_s - measured.median_s) / measured.median_s,
            "phases": predicted.returns[0], "memcpy_Bps": prims.memcpy_Bps,
            "reduce_Bps": prims.reduce_Bps, "first_sum_Bps": prims.first_sum_Bps})
    return rows
